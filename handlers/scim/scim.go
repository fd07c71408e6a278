// Package scim serves SCIM 2.0 (RFC 7644) under /scim/v2/ on github.com/elimity-com/scim,
// which parses requests, validates them against the RFC 7643 schemas, parses filters
// and PATCH paths and writes §3.12 error documents. This package authenticates the
// organization's bearer token and hands each call to models/scim.
package scim

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/elimity-com/scim"
	scimerrors "github.com/elimity-com/scim/errors"
	"github.com/elimity-com/scim/optional"
	"github.com/elimity-com/scim/schema"
	"github.com/labstack/echo/v4"

	"gantry/models/errs"
	model "gantry/models/scim"
)

// Directory is what the endpoints use of models/scim.
type Directory interface {
	Authenticate(ctx context.Context, raw string) (model.Client, error)
	CreateUser(ctx context.Context, doc map[string]any) (model.Resource, error)
	User(ctx context.Context, id string) (model.Resource, error)
	Users(ctx context.Context) ([]model.Resource, error)
	ReplaceUser(ctx context.Context, id string, doc map[string]any) (model.Resource, error)
	PatchUser(ctx context.Context, id string, ops []model.Op) (model.Resource, error)
	DeleteUser(ctx context.Context, id string) error
	CreateGroup(ctx context.Context, doc map[string]any) (model.Resource, error)
	Group(ctx context.Context, id string) (model.Resource, error)
	Groups(ctx context.Context) ([]model.Resource, error)
	ReplaceGroup(ctx context.Context, id string, doc map[string]any) (model.Resource, error)
	PatchGroup(ctx context.Context, id string, ops []model.Op) (model.Resource, error)
	DeleteGroup(ctx context.Context, id string) error
}

// Endpoints serves /scim/v2/.
type Endpoints struct {
	Directory Directory
	Logger    *slog.Logger
}

// Register mounts the endpoints on g, outside sessions and CSRF: a directory sends a
// bearer token and nothing else.
func (h Endpoints) Register(g *echo.Group) error {
	// Entra sends booleans as strings ("False"): the library's one switch for it.
	schema.SetAllowStringValues(true)
	server, err := scim.NewServer(&scim.ServerArgs{
		ServiceProviderConfig: &scim.ServiceProviderConfig{SupportFiltering: true, SupportPatch: true, MaxResults: 200,
			AuthenticationSchemes: []scim.AuthenticationScheme{{Type: scim.AuthenticationTypeOauthBearerToken, Name: "SCIM token",
				Description: "The organization's SCIM token, made by an owner and shown once."}}},
		ResourceTypes: []scim.ResourceType{
			{ID: optional.NewString("User"), Name: "User", Endpoint: "/Users", Description: optional.NewString("People"),
				Schema: schema.CoreUserSchema(), SchemaExtensions: []scim.SchemaExtension{{Schema: schema.ExtensionEnterpriseUser()}},
				Handler: users{h}},
			{ID: optional.NewString("Group"), Name: "Group", Endpoint: "/Groups", Description: optional.NewString("Groups"),
				Schema: schema.CoreGroupSchema(), Handler: groups{h}},
		},
	})
	if err != nil {
		return err
	}
	serve := echo.WrapHandler(http.StripPrefix("/scim", h.authenticated(server)))
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		g.Add(method, "/scim/v2/*", serve)
	}
	return nil
}

// authenticated admits a request bearing an organization's SCIM token; anything else
// is a 401 error document, the same for every refusal.
func (h Endpoints) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		client, err := h.Directory.Authenticate(r.Context(), strings.TrimSpace(raw))
		if !ok || err != nil {
			if err != nil && !errors.Is(err, errs.ErrUnauthenticated) {
				h.Logger.ErrorContext(r.Context(), "authenticating a SCIM token", "error", err)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="scim"`)
			writeError(w, scimerrors.ScimError{Status: http.StatusUnauthorized, Detail: "A valid SCIM token is required."})
			return
		}
		next.ServeHTTP(w, r.WithContext(model.WithClient(r.Context(), client)))
	})
}

func writeError(w http.ResponseWriter, e scimerrors.ScimError) {
	w.Header().Set("Content-Type", "application/scim+json")
	raw, _ := json.Marshal(e)
	w.WriteHeader(e.Status)
	_, _ = w.Write(raw)
}

// scimError maps a domain error to its §3.12 document; what the directory cannot act
// on is logged and told as a bare 500.
func (h Endpoints) scimError(r *http.Request, id string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errs.ErrNotFound):
		return scimerrors.ScimErrorResourceNotFound(id)
	case errors.Is(err, model.ErrConflict):
		return scimerrors.ScimErrorUniqueness
	case errors.Is(err, model.ErrInvalidValue):
		return scimerrors.ScimError{ScimType: scimerrors.ScimTypeInvalidValue, Status: http.StatusBadRequest, Detail: err.Error()}
	case errors.Is(err, model.ErrNoTarget):
		return scimerrors.ScimErrorNoTarget
	}
	h.Logger.ErrorContext(r.Context(), "SCIM request failed", "error", err)
	return scimerrors.ScimErrorInternal
}
