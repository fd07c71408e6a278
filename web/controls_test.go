package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"gantry/models/authz"
)

// The control table test (issue 37): for every role, every page the role can reach
// (every GET route of the route table, with the fixtures' objects) is parsed, and every
// control it renders (a link within the app, a form, an htmx request) is used as that
// role: a link is followed, a form is submitted with the fields the page gave it. No
// rendered control may answer 403: a page shows an action only when the rules let the
// person take it.
//
// Forms are submitted for real, on the route fixtures' own throwaway application, role
// after role from the least allowed (viewer, auditor) to the most (admin, owner), after
// every page was read and every link followed: what an operator or admin changes by
// submitting cannot hide a control from a role already checked. Signing out is the one
// form left unsubmitted (it would end the session the rest of the test uses); it is on
// every page for everyone.

// control is one action a page renders.
type control struct {
	page   string // the page it is on
	label  string // its text, for the report
	method string
	action string // path and query within the app
	form   url.Values
}

func (c control) String() string {
	return fmt.Sprintf("%s %s (%q on %s)", c.method, c.action, c.label, c.page)
}

// unsubmitted are the forms the test does not send, and why.
var unsubmitted = map[string]string{
	"/logout": "ends the session the test goes on with; every signed-in person may sign out",
}

// controlPages are the pages the test reads: every GET route of the route table that
// answers a page (not the API, static files, sign-in hops or live streams), with acme's
// own objects.
func (fx *routeFixtures) controlPages(t *testing.T) []string {
	cases, uncovered := routeCases(fx.app.Server.Echo.Routes(), fx.objectParams(), fx.enumParams())
	require.Empty(t, uncovered)
	skip := []string{"/api/", "/static/", "/state/", "/workload/", "/.well-known/", "/login", "/auth/", "/signed-out", "/healthz", "/readyz"}
	var out []string
	for _, c := range cases {
		if c.method != http.MethodGet || c.routeMethod() != http.MethodGet || slices.ContainsFunc(skip, func(p string) bool { return strings.HasPrefix(c.pattern, p) }) {
			continue
		}
		if c.exempt != "" && c.pattern != "/catalog/:name" {
			continue
		}
		id := ""
		if c.object != nil {
			id = c.object.own
		}
		p := c.path(id, nil)
		out = append(out, p+listQuery[p])
	}
	return slices.Compact(out)
}

// pageControls reads the controls of page (its HTML).
func pageControls(t *testing.T, page, body string) []control {
	doc, err := html.Parse(strings.NewReader(body))
	require.NoError(t, err, page)
	var out []control
	var walk func(n *html.Node, form *html.Node)
	walk = func(n *html.Node, form *html.Node) {
		if n.Type == html.ElementNode {
			switch n.DataAtom {
			case atom.A:
				if href, ok := attr(n, "href"); ok && inApp(href) {
					out = append(out, control{page: page, label: text(n), method: http.MethodGet, action: href})
				}
			case atom.Form:
				form = n
				method := strings.ToUpper(attrOr(n, "method", http.MethodGet))
				action := attrOr(n, "action", page)
				if inApp(action) {
					c := control{page: page, label: formLabel(n), method: method, action: action}
					if method != http.MethodGet {
						c.form = fields(n, nil)
					}
					out = append(out, c)
				}
			case atom.Button, atom.Input:
				if to, ok := attr(n, "formaction"); ok && inApp(to) && form != nil {
					out = append(out, control{page: page, label: text(n) + attrOr(n, "value", ""), method: strings.ToUpper(attrOr(n, "formmethod", attrOr(form, "method", "GET"))),
						action: to, form: fields(form, n)})
				}
			}
			for _, hx := range []string{"hx-get", "hx-post"} {
				if to, ok := attr(n, hx); ok && inApp(to) {
					c := control{page: page, label: hx + " " + text(n), method: strings.ToUpper(strings.TrimPrefix(hx, "hx-")), action: to}
					if c.method == http.MethodPost {
						c.form = url.Values{}
						if form != nil {
							c.form = fields(form, nil)
						}
					}
					out = append(out, c)
				}
			}
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch, form)
		}
	}
	walk(doc, nil)
	return out
}

// inApp: a path within the app that is not a static file or an anchor.
func inApp(href string) bool {
	return strings.HasPrefix(href, "/") && !strings.HasPrefix(href, "//") && !strings.HasPrefix(href, "/static/")
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func attrOr(n *html.Node, key, or string) string {
	if v, ok := attr(n, key); ok && v != "" {
		return v
	}
	return or
}

// text is a node's text, spaces folded (its aria-label when it has none).
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(n)
	s := strings.Join(strings.Fields(b.String()), " ")
	if s == "" {
		s = attrOr(n, "aria-label", "")
	}
	return s
}

// formLabel names a form by its first submit button's text.
func formLabel(form *html.Node) string {
	label := ""
	visit(form, func(n *html.Node) {
		if label == "" && (n.DataAtom == atom.Button || (n.DataAtom == atom.Input && attrOr(n, "type", "") == "submit")) {
			label = text(n) + attrOr(n, "value", "")
		}
	})
	if label == "" {
		label = "form " + attrOr(form, "id", attrOr(form, "data-testid", ""))
	}
	return label
}

func visit(n *html.Node, fn func(*html.Node)) {
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if ch.Type == html.ElementNode {
			fn(ch)
		}
		visit(ch, fn)
	}
}

// fields are what a browser submits of form as the page drew it: text fields and
// hidden ones with their values, checked boxes, each select's chosen option and the
// submitting button's name (submitter, or the form's first named button).
func fields(form, submitter *html.Node) url.Values {
	v := url.Values{}
	pressed := submitter != nil
	visit(form, func(n *html.Node) {
		name, ok := attr(n, "name")
		if !ok || name == "" {
			return
		}
		if _, off := attr(n, "disabled"); off {
			return
		}
		switch n.DataAtom {
		case atom.Input:
			switch attrOr(n, "type", "text") {
			case "checkbox", "radio":
				if _, checked := attr(n, "checked"); checked {
					v.Add(name, attrOr(n, "value", "on"))
				}
			case "submit", "image", "button", "reset", "file":
				if !pressed && attrOr(n, "type", "") == "submit" {
					v.Add(name, attrOr(n, "value", ""))
					pressed = true
				}
			default:
				val, _ := attr(n, "value")
				v.Add(name, val)
			}
		case atom.Textarea:
			v.Add(name, text(n))
		case atom.Select:
			chosen, first := "", ""
			visit(n, func(o *html.Node) {
				if o.DataAtom != atom.Option {
					return
				}
				val, ok := attr(o, "value")
				if !ok {
					val = text(o)
				}
				if first == "" {
					first = val
				}
				if _, sel := attr(o, "selected"); sel && chosen == "" {
					chosen = val
				}
			})
			if chosen == "" {
				chosen = first
			}
			v.Add(name, chosen)
		case atom.Button:
			if !pressed && attrOr(n, "type", "submit") == "submit" {
				v.Add(name, attrOr(n, "value", ""))
				pressed = true
			}
		}
	})
	if submitter != nil {
		if name, ok := attr(submitter, "name"); ok && name != "" {
			v.Set(name, attrOr(submitter, "value", ""))
		}
	}
	return v
}

// checkControls reads every page as each of people and uses every control it renders
// as that person; it returns the controls that answered 403 ("who: control").
func (fx *routeFixtures) checkControls(t *testing.T, people []routeWho, pages []string) []string {
	type owned struct {
		who routeWho
		c   control
	}
	var links, forms []owned
	for _, who := range people {
		seen := map[string]bool{}
		for _, page := range pages {
			a := fx.send(t, call{who: who, method: http.MethodGet, path: page})
			if a.status != http.StatusOK || !strings.HasPrefix(a.contentType, "text/html") {
				continue // a page the role does not reach (403), or no page at all
			}
			for _, c := range pageControls(t, page, a.body) {
				key := c.method + " " + c.action
				if seen[key] {
					continue
				}
				seen[key] = true
				if c.method == http.MethodGet {
					links = append(links, owned{who, c})
				} else if _, skip := unsubmitted[c.action]; !skip {
					forms = append(forms, owned{who, c})
				}
			}
		}
	}
	var forbidden []string
	for _, l := range links {
		if a := fx.send(t, call{who: l.who, method: http.MethodGet, path: l.c.action}); a.status == http.StatusForbidden {
			forbidden = append(forbidden, l.who.name+": "+l.c.String())
		}
	}
	for _, f := range forms {
		if a := fx.send(t, call{who: f.who, method: f.c.method, path: f.c.action, form: f.c.form}); a.status == http.StatusForbidden {
			forbidden = append(forbidden, f.who.name+": "+f.c.String())
		}
	}
	require.Greater(t, len(links), 100, "links were found")
	require.Greater(t, len(forms), 10, "forms were found")
	sort.Strings(forbidden)
	return forbidden
}

func TestControlsFromTheRules(t *testing.T) {
	t.Parallel()
	fx := newRouteFixtures(t)
	pages := fx.controlPages(t)
	require.Contains(t, pages, "/workspaces/"+fx.acme.ws)
	require.Contains(t, pages, "/catalog")
	// Least allowed first: what the others submit changes the fixtures after them.
	people := []routeWho{fx.viewer, fx.auditor, fx.operator, fx.admin, fx.owner}
	roles := []authz.Role{authz.RoleViewer, authz.RoleAuditor, authz.RoleOperator, authz.RoleAdmin, authz.RoleOwner}
	require.ElementsMatch(t, authz.Roles, roles, "every role authz defines has a person here")
	forbidden := fx.checkControls(t, people, pages)
	require.Empty(t, forbidden, "controls a role cannot use (each answered 403):\n%s", strings.Join(forbidden, "\n"))
}
