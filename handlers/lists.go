package handlers

import (
	"cmp"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"gantry/models/errs"
	"gantry/models/listing"
	"gantry/views"
	"gantry/views/paths"
)

// What every long list reads from its query and links back to: a search text (q), a
// sort (sort=key or -key), a cursor (after= or before=), and filters of its own.

// listRequest is one request of a list page.
type listRequest struct {
	path   string
	query  url.Values // as asked, for the links that change one thing
	text   string
	errors map[string]string // the search field's message, if its text was refused
	page   listing.Page
}

// sortColumn is one column of a list's table: a sort key ("" when it does not sort),
// and whether the first click sorts it descending (times: newest first).
type sortColumn struct {
	label     string
	key       string
	descFirst bool
	class     string
}

// readList reads a list's query. A search text nothing can hold comes back as the
// search field's message (the page shows it, with nothing searched); a cursor edited
// by hand is a bad request.
func readList(c echo.Context, path string, keys []string, def listing.Sort, limit int) (listRequest, error) {
	q := c.QueryParams()
	l := listRequest{path: path, query: q, page: listing.Page{Sort: listing.ParseSort(q.Get("sort"), keys, def), Limit: limit}}
	text, err := listing.Search(q.Get("q"))
	if v, ok := errs.AsValidation(err); ok {
		l.errors = v.Fields
	} else {
		l.text = text
	}
	l.page, err = l.pageOf("")
	return l, err
}

// pageOf is the page of the list whose cursors are prefix+"after" and prefix+"before"
// (a page holding two lists pages each on its own).
func (l listRequest) pageOf(prefix string) (listing.Page, error) {
	p := l.page
	var err error
	if p.After, err = listing.ParseCursor(l.query.Get(prefix + "after")); err != nil {
		return p, err
	}
	if p.Before, err = listing.ParseCursor(l.query.Get(prefix + "before")); err != nil {
		return p, err
	}
	if p.After != nil && p.Before != nil {
		return p, errs.Explain(errs.ErrBadRequest, "This page link asks for the pages both after and before a row. Start again from the list's first page.")
	}
	return p, nil
}

// refused is whether the search text was refused (the page lists nothing).
func (l listRequest) refused() bool { return len(l.errors) > 0 }

// link is the list with the changes in set (a "" value removes a parameter), always
// from its first page unless set names a cursor.
func (l listRequest) link(set map[string]string) string {
	q := url.Values{}
	for k, v := range l.query {
		if !strings.HasSuffix(k, "after") && !strings.HasSuffix(k, "before") && len(v) > 0 && v[0] != "" {
			q.Set(k, v[0])
		}
	}
	for k, v := range set {
		if v == "" {
			q.Del(k)
		} else {
			q.Set(k, v)
		}
	}
	return paths.Filtered(l.path, q)
}

// headers are the table's headings: a sortable one links to the list sorted by it, the
// other way round when it already is.
func (l listRequest) headers(cols []sortColumn) []views.SortHeader {
	return l.headersFor("sort", l.page.Sort, cols)
}

// sortOf reads a second table's sort from its own parameter (a page with two lists).
func (l listRequest) sortOf(param string, keys []string, def listing.Sort) listing.Sort {
	return listing.ParseSort(l.query.Get(param), keys, def)
}

// headersFor are the headings of the table sorted by current, whose sort is in param.
func (l listRequest) headersFor(param string, current listing.Sort, cols []sortColumn) []views.SortHeader {
	out := make([]views.SortHeader, len(cols))
	for i, col := range cols {
		h := views.SortHeader{Label: col.label, Class: col.class}
		if col.key != "" {
			next := listing.Sort{Key: col.key, Desc: col.descFirst}
			h.Sort = "none"
			if current.Key == col.key {
				h.Sort = map[bool]string{false: "ascending", true: "descending"}[current.Desc]
				next.Desc = !current.Desc
			}
			h.URL = l.link(map[string]string{param: next.String()})
		}
		out[i] = h
	}
	return out
}

// pager links the pages around a result, with cursors named prefix+"after" and
// prefix+"before"; the other lists of the page start again from their first pages.
func pager[T any](l listRequest, prefix string, res listing.Result[T], label string) views.Pager {
	p := views.Pager{Label: label}
	if res.Prev != nil { // not the first page
		p.First = l.link(nil)
		p.Prev = l.link(map[string]string{prefix + "before": res.Prev.String()})
	}
	if res.Next != nil {
		p.Next = l.link(map[string]string{prefix + "after": res.Next.String()})
	}
	return p
}

// controls is the list's search and filter form as asked.
func (l listRequest) controls(id, label, hint string, filters []views.ListFilter, checks []views.ListCheck) views.ListControls {
	c := views.ListControls{ID: id, Action: l.path, SearchLabel: label, SearchHint: hint, Search: l.query.Get("q"), MaxSearch: listing.MaxSearch,
		Filters: filters, Checks: checks, Errors: l.errors, Filtered: l.query.Get("q") != ""}
	if l.query.Get("sort") != "" {
		c.Keep = append(c.Keep, views.KV{Key: "sort", Value: l.page.Sort.String()})
	}
	for _, f := range filters {
		c.Filtered = c.Filtered || f.Selected != ""
	}
	for _, ch := range checks {
		c.Filtered = c.Filtered || ch.Checked
	}
	return c
}

// choice is the value of filter name if it is among choices ("" otherwise: an option
// gone since the link was made filters nothing rather than everything).
func choice(l listRequest, name string, choices []views.ListChoice) string {
	v := l.query.Get(name)
	for _, c := range choices {
		if c.Value == v {
			return v
		}
	}
	return ""
}

// listChoices are the options of a filter by id, sorted by their names.
func listChoices(byID map[string]string) []views.ListChoice {
	out := make([]views.ListChoice, 0, len(byID))
	for id, name := range byID {
		out = append(out, views.ListChoice{Value: id, Label: name})
	}
	slices.SortFunc(out, func(a, b views.ListChoice) int {
		return cmp.Or(cmp.Compare(a.Label, b.Label), cmp.Compare(a.Value, b.Value))
	})
	return out
}
