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

	// A rate-limited operation documents its 429 and the Retry-After that comes with it;
	// another does not.
	s.Route(g, Op{Method: http.MethodPost, Path: "/api/v1/things/:id/decide", ID: "decideThing", Tag: "things", Body: apiPart{}, RateLimited: true},
		func(echo.Context) error { return nil })
	raw, err = s.Document("1")
	require.NoError(t, err)
	var limited struct {
		Paths map[string]map[string]struct {
			Responses map[string]struct {
				Headers map[string]struct {
					Required bool
					Schema   map[string]any
				}
			}
		}
	}
	require.NoError(t, json.Unmarshal(raw, &limited))
	require.NotContains(t, limited.Paths["/api/v1/things/{id}"]["post"].Responses, "429")
	tooMany, ok := limited.Paths["/api/v1/things/{id}/decide"]["post"].Responses["429"]
	require.True(t, ok, "the 429 is described")
	require.True(t, tooMany.Headers["Retry-After"].Required)
	require.Equal(t, "integer", tooMany.Headers["Retry-After"].Schema["type"])

	s.Route(g, Op{Method: http.MethodGet, Path: "/api/v1/other", ID: "other", Tag: "things", Response: Thing{}},
		func(echo.Context) error { return nil })
	_, err = s.Document("1")
	require.ErrorContains(t, err, "would both be schema Thing")
}
