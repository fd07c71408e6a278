package listing_test

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"

	"gantry/models/db/dbtest"
	"gantry/models/errs"
	"gantry/models/listing"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }

type item struct {
	ID   string
	Name string
	Rank int
	At   time.Time
}

func (item) TableName() string { return "listing_items" }

var orders = []listing.Order[item]{
	{Key: "name", Columns: []listing.Column[item]{
		{SQL: "name", Value: func(i item) string { return i.Name }},
		{SQL: "id", Value: func(i item) string { return i.ID }}}},
	{Key: "rank", Columns: []listing.Column[item]{
		{SQL: "rank", Kind: listing.Int, Value: func(i item) string { return strconv.Itoa(i.Rank) }},
		{SQL: "name", Value: func(i item) string { return i.Name }},
		{SQL: "id", Value: func(i item) string { return i.ID }}}},
	{Key: "at", Columns: []listing.Column[item]{
		{SQL: "at", Kind: listing.Time, Value: func(i item) string { return listing.TimeValue(i.At) }},
		{SQL: "id", Value: func(i item) string { return i.ID }}}},
}

// seed writes n items with many ties in every column (so only the id breaks them) and
// timestamps with microseconds, as PostgreSQL keeps them.
func seed(t *testing.T, gdb *gorm.DB, n int) []item {
	t.Helper()
	require.NoError(t, gdb.Exec(`CREATE TABLE listing_items (id text PRIMARY KEY, name text NOT NULL, rank int NOT NULL, at timestamptz NOT NULL)`).Error)
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var items []item
	for i := range n {
		items = append(items, item{ID: fmt.Sprintf("it-%03d", (i*37)%n), Name: []string{"alpha", "beta", "Gamma", "delta"}[i%4],
			Rank: i % 3, At: base.Add(time.Duration(i%7) * 1234567 * time.Microsecond)})
	}
	require.NoError(t, gdb.Create(&items).Error)
	return items
}

// expected sorts items as PostgreSQL orders them (the test database's collation is C:
// byte order, like cmp.Compare on strings).
func expected(items []item, key string, desc bool) []string {
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, func(a, b item) int {
		var c int
		switch key {
		case "name":
			c = cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
		case "rank":
			c = cmp.Or(cmp.Compare(a.Rank, b.Rank), cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
		case "at":
			c = cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID))
		}
		if desc {
			return -c
		}
		return c
	})
	ids := make([]string, len(sorted))
	for i, it := range sorted {
		ids[i] = it.ID
	}
	return ids
}

func ids(rows []item) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.ID
	}
	return out
}

// TestPagesWalkTheWholeOrder: in every order and direction, following Next from the
// first page visits every row once in order, and following Prev back from the last
// page gives the same pages again; the ends have no cursor beyond them.
func TestPagesWalkTheWholeOrder(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	var collation string
	require.NoError(t, gdb.Raw("SELECT datcollate FROM pg_database WHERE datname = current_database()").Scan(&collation).Error)
	items := seed(t, gdb, 103)
	for _, o := range orders {
		for _, desc := range []bool{false, true} {
			sort := listing.Sort{Key: o.Key, Desc: desc}
			t.Run(sort.String(), func(t *testing.T) {
				want := expected(items, o.Key, desc)
				if collation != "C" && o.Key != "at" {
					t.Logf("collation %s: comparing against the database's own ORDER BY", collation)
					var all []item
					require.NoError(t, gdb.Order(orderBy(o, desc)).Find(&all).Error)
					want = ids(all)
				}
				walk(t, sort, want, func(p listing.Page) (listing.Result[item], error) {
					return listing.Fetch(gdb.Model(&item{}), orders, p)
				})
			})
		}
	}
}

// walk follows Next from the first page of sort through every row (want, in order, 10
// a page), then Prev back from the last page, each page equal to the one seen
// forwards, and Next again from each page reached backwards.
func walk(t *testing.T, sort listing.Sort, want []string, fetch func(listing.Page) (listing.Result[item], error)) {
	t.Helper()
	var pages [][]string
	var nexts []*listing.Cursor
	var got []string
	page := listing.Page{Sort: sort, Limit: 10}
	for {
		res, err := fetch(page)
		require.NoError(t, err)
		require.NotEmpty(t, res.Rows)
		require.Equal(t, page.After != nil, res.Prev != nil, "only the first page has nothing before it")
		pages = append(pages, ids(res.Rows))
		got = append(got, ids(res.Rows)...)
		nexts = append(nexts, res.Next)
		if res.Next == nil {
			break
		}
		page = listing.Page{Sort: sort, Limit: 10, After: decoded(t, res.Next)}
	}
	require.Equal(t, want, got)
	require.Len(t, pages, 11)
	require.Len(t, pages[10], 3)

	// Back from the last page: Prev gives each earlier page exactly.
	res, err := fetch(listing.Page{Sort: sort, Limit: 10, After: decoded(t, nexts[9])})
	require.NoError(t, err)
	require.Equal(t, pages[10], ids(res.Rows))
	for i := 9; i >= 0; i-- {
		require.NotNil(t, res.Prev, "page %d has one before it", i+1)
		res, err = fetch(listing.Page{Sort: sort, Limit: 10, Before: decoded(t, res.Prev)})
		require.NoError(t, err)
		require.Equal(t, pages[i], ids(res.Rows), "page %d read backwards", i)
		// And Next from a page reached backwards leads forwards again.
		fwd, err := fetch(listing.Page{Sort: sort, Limit: 10, After: decoded(t, res.Next)})
		require.NoError(t, err)
		require.Equal(t, pages[i+1], ids(fwd.Rows), "the page after page %d", i)
	}
	require.Nil(t, res.Prev, "the first page, reached backwards, has nothing before it")
}

// TestSlicePagesAsFetchDoes: rows held in memory page exactly as a query does.
func TestSlicePagesAsFetchDoes(t *testing.T) {
	t.Parallel()
	var items []item
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i := range 103 {
		items = append(items, item{ID: fmt.Sprintf("it-%03d", (i*37)%103), Name: []string{"alpha", "beta", "Gamma", "delta"}[i%4],
			Rank: i % 3, At: base.Add(time.Duration(i%7) * 1234567 * time.Microsecond)})
	}
	for _, o := range orders {
		for _, desc := range []bool{false, true} {
			sort := listing.Sort{Key: o.Key, Desc: desc}
			t.Run(sort.String(), func(t *testing.T) {
				walk(t, sort, expected(items, o.Key, desc), func(p listing.Page) (listing.Result[item], error) {
					return listing.Slice(items, orders, p)
				})
			})
		}
	}
	_, err := listing.Slice(items, orders, listing.Page{Sort: listing.Sort{Key: "rank"}, After: &listing.Cursor{Values: []string{"x", "a", "b"}}})
	require.ErrorIs(t, err, errs.ErrBadRequest)
}

// TestPastTheEnd: a cursor beyond the last row (rows gone since the link was made)
// gives an empty page with the way back, from a query and from memory alike.
func TestPastTheEnd(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	items := seed(t, gdb, 5)
	beyond := &listing.Cursor{Values: []string{"zzz", "it-999"}}
	for name, fetch := range map[string]func(listing.Page) (listing.Result[item], error){
		"query": func(p listing.Page) (listing.Result[item], error) {
			return listing.Fetch(gdb.Model(&item{}), orders, p)
		},
		"memory": func(p listing.Page) (listing.Result[item], error) { return listing.Slice(items, orders, p) },
	} {
		res, err := fetch(listing.Page{Sort: listing.Sort{Key: "name"}, After: beyond})
		require.NoError(t, err)
		require.Empty(t, res.Rows, name)
		require.Equal(t, beyond, res.Prev, "%s: the way back", name)
		require.Nil(t, res.Next, name)
	}
}

func orderBy(o listing.Order[item], desc bool) string {
	dir := " ASC"
	if desc {
		dir = " DESC"
	}
	s := ""
	for i, c := range o.Columns {
		if i > 0 {
			s += ", "
		}
		s += c.SQL + dir
	}
	return s
}

// decoded round-trips a cursor through its URL form, as a browser carries it.
func decoded(t *testing.T, c *listing.Cursor) *listing.Cursor {
	t.Helper()
	require.NotNil(t, c)
	out, err := listing.ParseCursor(c.String())
	require.NoError(t, err)
	return out
}

// TestBrokenCursorsAreBadRequests: a cursor edited by hand (not base64, not JSON, values
// of the wrong kind or number, a NUL) is a bad request, never an SQL error.
func TestBrokenCursorsAreBadRequests(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	seed(t, gdb, 5)
	for _, raw := range []string{"%%%", "bm90IGpzb24", (listing.Cursor{}).String()} {
		_, err := listing.ParseCursor(raw)
		require.ErrorIs(t, err, errs.ErrBadRequest, raw)
	}
	for name, c := range map[string]listing.Cursor{
		"not a number": {Values: []string{"x", "beta", "it-001"}},
		"not a time":   {Values: []string{"yesterday", "it-001"}},
		"too few":      {Values: []string{"beta"}},
		"a NUL":        {Values: []string{"be\x00ta", "it-001"}},
		"not UTF-8":    {Values: []string{"\xff", "it-001"}},
	} {
		key := map[string]string{"not a number": "rank", "not a time": "at", "too few": "name", "a NUL": "name", "not UTF-8": "name"}[name]
		_, err := listing.Fetch(gdb.Model(&item{}), orders, listing.Page{Sort: listing.Sort{Key: key}, After: &c})
		require.ErrorIs(t, err, errs.ErrBadRequest, name)
	}
}

func TestParseSort(t *testing.T) {
	keys := []string{"name", "at"}
	def := listing.Sort{Key: "at", Desc: true}
	require.Equal(t, listing.Sort{Key: "name"}, listing.ParseSort("name", keys, def))
	require.Equal(t, listing.Sort{Key: "name", Desc: true}, listing.ParseSort("-name", keys, def))
	require.Equal(t, def, listing.ParseSort("rank", keys, def))
	require.Equal(t, def, listing.ParseSort("", keys, def))
	require.Equal(t, "-name", listing.Sort{Key: "name", Desc: true}.String())
}

// TestSearch: the text is trimmed; what no column can hold is refused with a message
// for the search field, and so is text that is too long.
func TestSearch(t *testing.T) {
	s, err := listing.Search("  billing ")
	require.NoError(t, err)
	require.Equal(t, "billing", s)
	for _, bad := range []string{"a\x00b", "\xfe\xff", strings.Repeat("a", listing.MaxSearch+1)} {
		_, err := listing.Search(bad)
		v, ok := errs.AsValidation(err)
		require.True(t, ok, "%q", bad)
		require.NotEmpty(t, v.Fields["q"])
	}
}

// TestContainsTakesWildcardsLiterally: % and _ in a search are characters, not patterns.
func TestContainsTakesWildcardsLiterally(t *testing.T) {
	t.Parallel()
	gdb := dbtest.New(t)
	seed(t, gdb, 4)
	require.NoError(t, gdb.Create(&item{ID: "it-x", Name: "50%_off", At: time.Now()}).Error)
	var found []item
	require.NoError(t, gdb.Where(listing.Contains("name"), "%_").Find(&found).Error)
	require.Equal(t, []string{"it-x"}, ids(found))
	require.NoError(t, gdb.Where(listing.Contains("name"), "GAMMA").Find(&found).Error)
	require.Equal(t, []string{"it-002"}, ids(found)[:1])
}
