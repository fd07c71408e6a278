package scim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/elimity-com/scim"
	scimerrors "github.com/elimity-com/scim/errors"
	"github.com/elimity-com/scim/optional"
	filter "github.com/scim2/filter-parser/v2"

	model "gantry/models/scim"
)

// users is the library's handler for /Users.
type users struct{ Endpoints }

func (h users) Create(r *http.Request, attrs scim.ResourceAttributes) (scim.Resource, error) {
	res, err := h.Directory.CreateUser(r.Context(), attrs)
	return resource(res), h.scimError(r, "", err)
}

func (h users) Get(r *http.Request, id string) (scim.Resource, error) {
	res, err := h.Directory.User(r.Context(), id)
	return resource(res), h.scimError(r, id, err)
}

func (h users) GetAll(r *http.Request, params scim.ListRequestParams) (scim.Page, error) {
	all, err := h.Directory.Users(r.Context())
	if err != nil {
		return scim.Page{}, h.scimError(r, "", err)
	}
	return page(all, params), nil
}

func (h users) Replace(r *http.Request, id string, attrs scim.ResourceAttributes) (scim.Resource, error) {
	res, err := h.Directory.ReplaceUser(r.Context(), id, attrs)
	return resource(res), h.scimError(r, id, err)
}

func (h users) Delete(r *http.Request, id string) error {
	return h.scimError(r, id, h.Directory.DeleteUser(r.Context(), id))
}

func (h users) Patch(r *http.Request, id string, ops []scim.PatchOperation) (scim.Resource, error) {
	converted, err := convert(ops)
	if err != nil {
		return scim.Resource{}, err
	}
	res, err := h.Directory.PatchUser(r.Context(), id, converted)
	return resource(res), h.scimError(r, id, err)
}

// groups is the library's handler for /Groups.
type groups struct{ Endpoints }

func (h groups) Create(r *http.Request, attrs scim.ResourceAttributes) (scim.Resource, error) {
	res, err := h.Directory.CreateGroup(r.Context(), attrs)
	return resource(res), h.scimError(r, "", err)
}

func (h groups) Get(r *http.Request, id string) (scim.Resource, error) {
	res, err := h.Directory.Group(r.Context(), id)
	return resource(res), h.scimError(r, id, err)
}

func (h groups) GetAll(r *http.Request, params scim.ListRequestParams) (scim.Page, error) {
	all, err := h.Directory.Groups(r.Context())
	if err != nil {
		return scim.Page{}, h.scimError(r, "", err)
	}
	return page(all, params), nil
}

func (h groups) Replace(r *http.Request, id string, attrs scim.ResourceAttributes) (scim.Resource, error) {
	res, err := h.Directory.ReplaceGroup(r.Context(), id, attrs)
	return resource(res), h.scimError(r, id, err)
}

func (h groups) Delete(r *http.Request, id string) error {
	return h.scimError(r, id, h.Directory.DeleteGroup(r.Context(), id))
}

func (h groups) Patch(r *http.Request, id string, ops []scim.PatchOperation) (scim.Resource, error) {
	converted, err := convert(ops)
	if err != nil {
		return scim.Resource{}, err
	}
	res, err := h.Directory.PatchGroup(r.Context(), id, converted)
	return resource(res), h.scimError(r, id, err)
}

// resource is a stored resource as the library writes it.
func resource(r model.Resource) scim.Resource {
	out := scim.Resource{ID: r.ID, Attributes: r.Doc, Meta: scim.Meta{Created: &r.Created, LastModified: &r.Updated,
		Version: fmt.Sprintf(`W/"%d"`, r.Updated.UnixMicro())}}
	if r.ExternalID != "" {
		out.ExternalID = optional.NewString(r.ExternalID)
	}
	return out
}

// page filters all (userName eq, externalId eq, displayName eq: the library's
// validator) and cuts the page the directory asked for.
func page(all []model.Resource, params scim.ListRequestParams) scim.Page {
	matched := make([]scim.Resource, 0, len(all))
	for _, r := range all {
		if params.FilterValidator != nil {
			attrs := map[string]any{"id": r.ID}
			for k, v := range r.Doc {
				attrs[k] = v
			}
			if params.FilterValidator.PassesFilter(attrs) != nil {
				continue
			}
		}
		matched = append(matched, resource(r))
	}
	start := max(params.StartIndex, 1) - 1
	end := min(len(matched), start+max(params.Count, 0))
	if start >= len(matched) {
		return scim.Page{TotalResults: len(matched), Resources: []scim.Resource{}}
	}
	return scim.Page{TotalResults: len(matched), Resources: matched[start:end]}
}

// convert turns the library's PATCH operations into the service's. The library has
// lower-cased op (Entra sends "Replace") and validated each path against the schema.
func convert(ops []scim.PatchOperation) ([]model.Op, error) {
	out := make([]model.Op, 0, len(ops))
	for _, op := range ops {
		m := model.Op{Op: strings.ToLower(op.Op), Value: plain(op.Value)}
		if p := op.Path; p != nil {
			m.Attr = p.AttributePath.AttributeName
			if p.AttributePath.URIPrefix != nil {
				m.URI = *p.AttributePath.URIPrefix
			}
			if p.AttributePath.SubAttribute != nil {
				m.Sub = *p.AttributePath.SubAttribute
			}
			if p.SubAttribute != nil {
				m.Sub = *p.SubAttribute
			}
			if p.ValueExpression != nil {
				e, ok := p.ValueExpression.(*filter.AttributeExpression)
				if !ok || e.Operator != filter.EQ {
					return nil, scimerrors.ScimErrorInvalidPath
				}
				m.Filter = &model.Match{Attr: e.AttributePath.AttributeName, Value: fmt.Sprint(e.CompareValue)}
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// plain turns the library's json.Number values back into plain JSON values.
func plain(v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(raw, &out) != nil {
		return v
	}
	return out
}
