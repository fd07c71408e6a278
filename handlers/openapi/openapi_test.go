package openapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
)

type apiThing struct {
	Name  string  `json:"name"`
	Note  string  `json:"note,omitempty"`
	Maybe *int    `json:"maybe"`
	Inner apiPart `json:"inner"`
}

type apiPart struct {
	Values []string `json:"values"`
}

type Thing struct{ Other bool }

// TestSchemasFromTypes: a route's types become components named without the "api"
// prefix; required fields are those without omitempty; pointers may be null; and two
// types that would share a name are an error, not a silently wrong document.
func TestSchemasFromTypes(t *testing.T) {
	var s Spec
	g := echo.New().Group("")
	s.Route(g, Op{Method: http.MethodPost, Path: "/api/v1/things/:id", ID: "makeThing", Tag: "things", Body: apiPart{}, Response: apiThing{}},
		func(echo.Context) error { return nil })
	raw, err := s.Document("1")
	require.NoError(t, err)
	var doc struct {
		Paths      map[string]map[string]map[string]any
		Components struct {
			Schemas map[string]struct {
				Required   []string
				Properties map[string]map[string]any
			}
		}
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Contains(t, doc.Paths, "/api/v1/things/{id}")
	thing := doc.Components.Schemas["Thing"]
	require.Equal(t, []string{"inner", "maybe", "name"}, thing.Required)
	require.Equal(t, []any{"integer", "null"}, thing.Properties["maybe"]["type"])
	require.Equal(t, "#/components/schemas/Part", thing.Properties["inner"]["$ref"])

	// Every operation documents its 429 (a wrong token's limit) and the Retry-After that
	// comes with it; a rate-limited one says it also counts per caller.
	s.Route(g, Op{Method: http.MethodPost, Path: "/api/v1/things/:id/decide", ID: "decideThing", Tag: "things", Body: apiPart{}, RateLimited: true},
		func(echo.Context) error { return nil })
	raw, err = s.Document("1")
	require.NoError(t, err)
	var limited struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Description string
				Headers     map[string]struct {
					Required bool
					Schema   map[string]any
				}
			}
		}
	}
	require.NoError(t, json.Unmarshal(raw, &limited))
	for _, p := range []string{"/api/v1/things/{id}", "/api/v1/things/{id}/decide"} {
		tooMany, ok := limited.Paths[p]["post"].Responses["429"]
		require.True(t, ok, "the 429 of %s is described", p)
		require.True(t, tooMany.Headers["Retry-After"].Required)
		require.Equal(t, "integer", tooMany.Headers["Retry-After"].Schema["type"])
		require.Contains(t, tooMany.Description, "wrong API token")
	}
	require.NotContains(t, limited.Paths["/api/v1/things/{id}"]["post"].Responses["429"].Description, "this caller")
	require.Contains(t, limited.Paths["/api/v1/things/{id}/decide"]["post"].Responses["429"].Description, "this caller")

	s.Route(g, Op{Method: http.MethodGet, Path: "/api/v1/other", ID: "other", Tag: "things", Response: Thing{}},
		func(echo.Context) error { return nil })
	_, err = s.Document("1")
	require.ErrorContains(t, err, "would both be schema Thing")
}
