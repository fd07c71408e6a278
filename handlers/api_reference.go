package handlers

import (
	"net/http"
	"reflect"
	"slices"

	"github.com/labstack/echo/v4"

	"gantry/handlers/openapi"
	"gantry/handlers/render"
	"gantry/views"
	"gantry/views/paths"
)

// APIReference serves the JSON API's reference page from the operations the API
// registered: the same list /api/v1/openapi.json describes.
type APIReference struct {
	Spec *openapi.Spec
}

// Register adds the reference page's route to g.
func (h APIReference) Register(g *echo.Group) { g.GET(paths.APIReference(), h.show) }

func (h APIReference) show(c echo.Context) error {
	var p views.APIReferenceProps
	index := map[string]int{}
	for _, op := range h.Spec.Ops() {
		v := views.APIOp{ID: op.ID, Method: op.Method, Path: openapi.OpenAPIPath(op.Path), Summary: op.Summary, Scope: op.Scope,
			Status: op.Status, Mutating: op.Mutating, Response: op.ContentType}
		if v.Status == 0 {
			v.Status = http.StatusOK
		}
		if op.Body != nil {
			v.Body = openapi.SchemaName(reflect.TypeOf(op.Body))
		}
		if op.Response != nil && v.Response == "" {
			v.Response = openapi.SchemaName(reflect.TypeOf(op.Response))
		}
		for _, q := range op.Query {
			v.Params = append(v.Params, q.Name)
		}
		i, ok := index[op.Tag]
		if !ok {
			i = len(p.Groups)
			index[op.Tag] = i
			p.Groups = append(p.Groups, views.APIGroup{Tag: op.Tag})
		}
		p.Groups[i].Ops = append(p.Groups[i].Ops, v)
	}
	slices.SortStableFunc(p.Groups, func(a, b views.APIGroup) int { return tagOrder(a.Tag) - tagOrder(b.Tag) })
	return render.Page(c, http.StatusOK, views.APIReference(p))
}

// tagOrder puts the API's sections in the order a pipeline uses them.
func tagOrder(tag string) int {
	order := []string{"catalog", "requests", "runs", "decisions", "workspaces", "environments", "policies", "matrix", "group-rules", "audit", "meta"}
	if i := slices.Index(order, tag); i >= 0 {
		return i
	}
	return len(order)
}
