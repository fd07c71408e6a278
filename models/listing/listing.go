// Package listing pages long lists by keyset: a page starts after (or ends before) the
// row a cursor names, in one of a list's orders, so the thousandth page costs what the
// first does and rows written meanwhile neither repeat nor vanish between pages (an
// offset would do both). Lists define their orders; this package turns an order and a
// cursor into SQL, and a fetched page into the cursors of its neighbours.
package listing

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"

	"gantry/models/errs"
)

// Kind is the type of a sort column: a cursor's value is checked against it before it
// reaches SQL (a cursor comes from a URL anyone can edit).
type Kind int

const (
	Text Kind = iota
	Int
	Time
)

// Column is one column of an order: its SQL expression, its kind, and how a row gives
// its value (a Time as RFC 3339 with nanoseconds).
type Column[T any] struct {
	SQL   string
	Kind  Kind
	Value func(T) string
}

// Order is one way of sorting a list: its columns, most significant first; the last
// must be unique (the id), so every row has one place. Every column runs in the same
// direction, which is what lets one row comparison, (a, b, id) > (?, ?, ?), say
// "after this row" and one index serve both directions.
type Order[T any] struct {
	Key     string // as URLs name it: "name"; "-name" is the same order descending
	Columns []Column[T]
}

// Sort is an order and its direction.
type Sort struct {
	Key  string
	Desc bool
}

// String is the sort as URLs carry it: "name" or "-name".
func (s Sort) String() string {
	if s.Desc {
		return "-" + s.Key
	}
	return s.Key
}

// ParseSort reads "key" or "-key"; a key not among keys gives def, so an old or edited
// link still shows the list.
func ParseSort(s string, keys []string, def Sort) Sort {
	desc := strings.HasPrefix(s, "-")
	key := strings.TrimPrefix(s, "-")
	if !slices.Contains(keys, key) {
		return def
	}
	return Sort{Key: key, Desc: desc}
}

// Cursor names one row of an order: its values in the order's columns.
type Cursor struct {
	Values []string `json:"v"`
}

// String encodes the cursor for a URL.
func (c Cursor) String() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ParseCursor decodes a cursor from a URL ("" is none: the first page).
func ParseCursor(s string) (*Cursor, error) {
	if s == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var c Cursor
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil || len(c.Values) == 0 {
		return nil, errBrokenLink
	}
	return &c, nil
}

// errBrokenLink is a cursor that names no row of its order: edited by hand, or made
// for another order. A bad request, said in words a person can act on.
var errBrokenLink = errs.Explain(errs.ErrBadRequest, "This page link is broken: it was changed, or made for another order of the list. Start again from the list's first page.")

// Page asks for one page: at most Limit rows after After, or before Before (one of
// them, or neither for the first page), in Sort.
type Page struct {
	Sort   Sort
	After  *Cursor
	Before *Cursor
	Limit  int
}

// Result is one page and the cursors of the pages on either side (nil at the ends).
type Result[T any] struct {
	Rows       []T
	Next, Prev *Cursor
}

// MaxLimit bounds a page.
const MaxLimit = 200

// Fetch reads the page p of query q (a gorm query with its filters, selecting rows of
// T) in the order of orders that p.Sort names (the first order when none does).
func Fetch[T any](q *gorm.DB, orders []Order[T], p Page) (Result[T], error) {
	o, limit := pick(orders, p)
	// Reading backwards (a previous page) walks the order reversed from the cursor and
	// turns the rows round afterwards.
	backwards := p.Before != nil
	cursor := p.After
	if backwards {
		cursor = p.Before
	}
	desc := p.Sort.Desc != backwards
	if cursor != nil {
		cond, args, err := o.after(*cursor, desc)
		if err != nil {
			return Result[T]{}, err
		}
		q = q.Where(cond, args...)
	}
	dir := " ASC"
	if desc {
		dir = " DESC"
	}
	for _, c := range o.Columns {
		q = q.Order(c.SQL + dir)
	}
	// One row more than the page says whether there is a page beyond it.
	var rows []T
	if err := q.Limit(limit + 1).Find(&rows).Error; err != nil {
		return Result[T]{}, fmt.Errorf("listing: %w", err)
	}
	more := len(rows) > limit
	rows = rows[:min(len(rows), limit)]
	if backwards {
		slices.Reverse(rows)
	}
	out := Result[T]{Rows: rows}
	if len(rows) == 0 {
		// Past either end (rows removed since the link was made): offer the way back.
		if backwards {
			out.Next = cursor
		} else if cursor != nil {
			out.Prev = cursor
		}
		return out, nil
	}
	first, last := o.cursorOf(rows[0]), o.cursorOf(rows[len(rows)-1])
	switch {
	case backwards:
		out.Next = &last // the row the cursor named is after this page
		if more {
			out.Prev = &first
		}
	default:
		if more {
			out.Next = &last
		}
		if cursor != nil {
			out.Prev = &first
		}
	}
	return out, nil
}

// pick is the order p.Sort names (the first when none does) and p's page size.
func pick[T any](orders []Order[T], p Page) (Order[T], int) {
	o := orders[0]
	for _, candidate := range orders {
		if candidate.Key == p.Sort.Key {
			o = candidate
		}
	}
	limit := p.Limit
	if limit <= 0 || limit > MaxLimit {
		limit = 50
	}
	return o, limit
}

// after is the SQL condition "the row comes after cursor c" in o (before it, read as
// the page's order goes, when desc).
func (o Order[T]) after(c Cursor, desc bool) (string, []any, error) {
	if len(c.Values) != len(o.Columns) {
		return "", nil, errBrokenLink
	}
	cols := make([]string, len(o.Columns))
	marks := make([]string, len(o.Columns))
	args := make([]any, len(o.Columns))
	for i, col := range o.Columns {
		v, cast, err := checked(col.Kind, c.Values[i])
		if err != nil {
			return "", nil, err
		}
		cols[i], marks[i], args[i] = col.SQL, "?"+cast, v
	}
	op := ">"
	if desc {
		op = "<"
	}
	return "(" + strings.Join(cols, ", ") + ") " + op + " (" + strings.Join(marks, ", ") + ")", args, nil
}

// checked is a cursor value as SQL takes it, refused when it is not of its kind.
func checked(k Kind, v string) (any, string, error) {
	bad := errBrokenLink
	switch k {
	case Int:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, "", bad
		}
		return n, "", nil
	case Time:
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return nil, "", bad
		}
		return t, "::timestamptz", nil
	}
	if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
		return nil, "", bad
	}
	return v, "::text", nil
}

func (o Order[T]) cursorOf(row T) Cursor {
	c := Cursor{Values: make([]string, len(o.Columns))}
	for i, col := range o.Columns {
		c.Values[i] = col.Value(row)
	}
	return c
}

// TimeValue is a Time column's value.
func TimeValue(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// MaxSearch bounds a search text.
const MaxSearch = 200

// Search is a list's search text as typed, trimmed; it refuses what no column could
// hold (a NUL, bytes that are not UTF-8) and text longer than MaxSearch, with a
// message for the search field.
func Search(s string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return "", &errs.Validation{Fields: map[string]string{"q": "The search holds characters that cannot be searched for."}}
	case utf8.RuneCountInString(s) > MaxSearch:
		return "", &errs.Validation{Fields: map[string]string{"q": fmt.Sprintf("Search for at most %d characters (this is %d).", MaxSearch, utf8.RuneCountInString(s))}}
	}
	return s, nil
}

// Contains is the SQL condition "column holds text, in any case" for a search (strpos
// rather than LIKE: the text's % and _ are not wildcards).
func Contains(column string) string { return "strpos(lower(" + column + "), lower(?)) > 0" }

// Slice pages rows held in memory (a compiled policy bundle's rules) as Fetch pages a
// query: sorted by the order p.Sort names, after or before a cursor, with the cursors of
// the pages around. Text compares byte by byte, Int as numbers, Time as instants.
func Slice[T any](rows []T, orders []Order[T], p Page) (Result[T], error) {
	o, limit := pick(orders, p)
	dir := 1
	if p.Sort.Desc {
		dir = -1
	}
	sorted := slices.Clone(rows)
	slices.SortStableFunc(sorted, func(a, b T) int { return dir * compareValues(o, o.cursorOf(a).Values, o.cursorOf(b).Values) })
	cursor, backwards := p.After, false
	if p.Before != nil {
		cursor, backwards = p.Before, true
	}
	start, end := 0, min(len(sorted), limit)
	if cursor != nil {
		if len(cursor.Values) != len(o.Columns) {
			return Result[T]{}, errBrokenLink
		}
		for i, col := range o.Columns {
			if _, _, err := checked(col.Kind, cursor.Values[i]); err != nil {
				return Result[T]{}, err
			}
		}
		// The first row after the cursor, in the page's order.
		at := len(sorted)
		for i, r := range sorted {
			if dir*compareValues(o, o.cursorOf(r).Values, cursor.Values) > 0 {
				at = i
				break
			}
		}
		if backwards {
			// Rows before the cursor end where the cursor's row (or the first after it) is.
			before := at
			if before > 0 && dir*compareValues(o, o.cursorOf(sorted[before-1]).Values, cursor.Values) == 0 {
				before--
			}
			start, end = max(0, before-limit), before
		} else {
			start, end = at, min(len(sorted), at+limit)
		}
	}
	out := Result[T]{Rows: sorted[start:end]}
	if start == end && cursor != nil {
		// Past either end (rows gone since the link was made): the way back, as Fetch.
		if backwards {
			out.Next = cursor
		} else {
			out.Prev = cursor
		}
		return out, nil
	}
	if start > 0 && end > start {
		c := o.cursorOf(sorted[start])
		out.Prev = &c
	}
	if end < len(sorted) && end > start {
		c := o.cursorOf(sorted[end-1])
		out.Next = &c
	}
	return out, nil
}

// compareValues compares two rows' values in o's columns, each by its kind.
func compareValues[T any](o Order[T], a, b []string) int {
	for i, col := range o.Columns {
		var c int
		switch col.Kind {
		case Int:
			x, _ := strconv.ParseInt(a[i], 10, 64)
			y, _ := strconv.ParseInt(b[i], 10, 64)
			c = cmp.Compare(x, y)
		case Time:
			x, _ := time.Parse(time.RFC3339Nano, a[i])
			y, _ := time.Parse(time.RFC3339Nano, b[i])
			c = x.Compare(y)
		default:
			c = strings.Compare(a[i], b[i])
		}
		if c != 0 {
			return c
		}
	}
	return 0
}
