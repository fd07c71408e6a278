// Package openapi describes the JSON API as an OpenAPI 3.1 document built from the
// operations the handlers register and the Go types they read and answer with, so the
// description cannot drift from the code: a route is documented by being registered
// through Route, and its schemas are reflected from the types its handler encodes.
package openapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// Param is a path or query parameter of an operation.
type Param struct {
	Name        string
	In          string // "path" or "query"
	Description string
	Type        string // "string" (default), "integer" or "boolean"
	Enum        []string
}

// Op is one operation of the API.
type Op struct {
	Method  string
	Path    string // the echo route, with :name parameters
	ID      string // operationId, unique
	Tag     string
	Summary string
	// Scope is the token scope that reaches the operation (see docs/api.md).
	Scope string
	Query []Param
	// Body is a value of the request body's type (nil: no body).
	Body any
	// Status is the success status (200 when zero) and Response a value of its JSON
	// body's type; ContentType names another media type (a log's text, a plan's
	// JSON as OpenTofu wrote it, an event stream), whose body is not described.
	Status      int
	Response    any
	ContentType string
	// OtherContentTypes are the other media types the answer may have (an export's
	// CSV beside its JSON lines).
	OtherContentTypes []string
	// Mutating operations need an Idempotency-Key header: every one but GET and HEAD,
	// unless ChangesNothing (a POST that only reads, such as a preview; the web layer
	// lists it in its read-only POSTs, web/idempotency.go).
	Mutating       bool
	ChangesNothing bool
	// RateLimited operations are counted per caller and per client address, and answer
	// 429 RATE_LIMITED with Retry-After over the limit (every operation can also meet the
	// wrong-token limit, and documents its 429); the web layer limits exactly the
	// operations registered with it (web/ratelimit.go).
	RateLimited bool
	// Ranged operations serve a file as http.ServeContent does, with its ETag: Range
	// and If-Range answer 206 with a part (or 416 for a range outside the file),
	// If-None-Match answers 304, If-Match and If-Unmodified-Since 412.
	Ranged bool
	// Conflict is what the 409 of an operation that changes nothing means (a changing
	// one has its own: the evidence moved, the time ran out).
	Conflict string
}

// Spec collects the operations of the API.
type Spec struct {
	mu  sync.Mutex
	ops []Op
}

// Route registers h for op on g and documents it.
func (s *Spec) Route(g *echo.Group, op Op, h echo.HandlerFunc) {
	if op.Method != http.MethodGet && op.Method != http.MethodHead && !op.ChangesNothing {
		op.Mutating = true
	}
	s.mu.Lock()
	s.ops = append(s.ops, op)
	s.mu.Unlock()
	g.Add(op.Method, op.Path, h)
}

// Ops returns the registered operations.
func (s *Spec) Ops() []Op {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Op(nil), s.ops...)
}

// Problem is the RFC 9457 problem document every error of the API is.
type Problem struct {
	Type   string            `json:"type"`
	Status int               `json:"status"`
	Title  string            `json:"title"`
	Detail string            `json:"detail"`
	Code   string            `json:"code" doc:"Gantry's stable machine code: FORBIDDEN, NOT_FOUND, UNAUTHENTICATED, INVALID_INPUT, CONFLICT, STALE_EVIDENCE, APPROVAL_EXPIRED, BAD_REQUEST, RATE_LIMITED, INTERNAL, …"`
	Fields map[string]string `json:"fields,omitempty" doc:"a message per input field that needs correcting"`
	// RequestID is set on server errors, to find the log lines.
	RequestID string `json:"request_id,omitempty"`
}

var echoParam = regexp.MustCompile(`:([a-zA-Z_]+)`)

// rangedResponses adds the answers of a file served with Range and conditional
// requests to responses, whose success answer is ok.
func rangedResponses(responses, ok map[string]any, problem func(string) map[string]any) {
	header := func(desc string) map[string]any {
		return map[string]any{"description": desc, "schema": map[string]any{"type": "string"}}
	}
	ok["headers"] = map[string]any{"ETag": header("The file's sha256, quoted: send it in If-Range to resume, in If-None-Match to ask whether it changed.")}
	partial := map[string]any{}
	for ct, c := range ok["content"].(map[string]any) {
		partial[ct] = c
	}
	partial["multipart/byteranges"] = map[string]any{}
	responses["206"] = map[string]any{"description": "The part of the file Range asked for (several ranges: multipart/byteranges), " +
		"while the file is still the one If-Range names.", "content": partial,
		"headers": map[string]any{"Content-Range": header("Which bytes of the file this is, and its size.")}}
	responses["304"] = map[string]any{"description": "The file is the one If-None-Match names: nothing is sent."}
	responses["412"] = problem("The file is not the one If-Match names, or changed since If-Unmodified-Since (PRECONDITION_FAILED).")
	unsatisfiable := problem("Range asks for bytes outside the file (RANGE_NOT_SATISFIABLE); Content-Range gives its size.")
	unsatisfiable["headers"] = map[string]any{"Content-Range": header("bytes */SIZE: the file's size.")}
	responses["416"] = unsatisfiable
}

// OpenAPIPath turns an echo route into an OpenAPI path (":id" to "{id}").
func OpenAPIPath(route string) string { return echoParam.ReplaceAllString(route, "{$1}") }

// Document is the OpenAPI 3.1 description of the registered operations.
func (s *Spec) Document(version string) (_ []byte, err error) {
	defer func() {
		// The reflector panics on a type it cannot describe or a name two types share:
		// a mistake in the code, returned as an error for the caller to report.
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	schemas := map[string]any{}
	r := reflector{schemas: schemas, named: map[string]reflect.Type{}}
	problemRef := r.schema(reflect.TypeOf(Problem{}))
	problem := func(desc string) map[string]any {
		return map[string]any{"description": desc, "content": map[string]any{"application/problem+json": map[string]any{"schema": problemRef}}}
	}
	pathItems := map[string]map[string]any{}
	seen := map[string]bool{}
	for _, op := range s.Ops() {
		if seen[op.ID] {
			return nil, fmt.Errorf("openapi: operation id %q twice", op.ID)
		}
		seen[op.ID] = true
		p := OpenAPIPath(op.Path)
		params := []any{}
		for _, m := range echoParam.FindAllStringSubmatch(op.Path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range op.Query {
			schema := map[string]any{"type": cmp.Or(q.Type, "string")}
			if len(q.Enum) > 0 {
				schema["enum"] = q.Enum
			}
			params = append(params, map[string]any{"name": q.Name, "in": "query", "description": q.Description, "schema": schema})
		}
		if op.Mutating {
			params = append(params, map[string]any{"name": "Idempotency-Key", "in": "header", "required": true,
				"description": "A fresh random value per intended change, sent again unchanged with a retry (up to 128 visible ASCII characters).",
				"schema":      map[string]any{"type": "string", "minLength": 1, "maxLength": 128}})
		}
		status := op.Status
		if status == 0 {
			status = http.StatusOK
		}
		ok := map[string]any{"description": http.StatusText(status)}
		switch {
		case op.ContentType == "application/json":
			ok["content"] = map[string]any{op.ContentType: map[string]any{"schema": map[string]any{"type": "object",
				"description": "a document of its own format (see the summary)"}}}
		case op.ContentType != "":
			content := map[string]any{}
			for _, ct := range append([]string{op.ContentType}, op.OtherContentTypes...) {
				content[ct] = map[string]any{"schema": map[string]any{"type": "string"}}
				if op.Ranged {
					// A file of its own format, served whole or in parts (JSON lines are
					// no one JSON value): no schema.
					content[ct] = map[string]any{}
				}
			}
			ok["content"] = content
		case op.Response != nil:
			ok["content"] = map[string]any{"application/json": map[string]any{"schema": r.schema(reflect.TypeOf(op.Response))}}
		}
		responses := map[string]any{fmt.Sprint(status): ok,
			"400": problem("The request could not be read (a broken body or cursor, a missing Idempotency-Key)."),
			"401": problem("No valid token or session."),
			"403": problem("The token's scope or its holder's role does not allow this."),
			"404": problem("Not found, or another organization's."),
			"422": problem("Some fields need correcting (see fields)."),
			"500": problem("Gantry could not finish the request.")}
		// Every call with a bearer token can meet the wrong-token limit (counted per client
		// address, web/failures.go); the decisions also meet their own.
		why := "Too many calls with a wrong API token came from this address in a short time (RATE_LIMITED): every call from it, right token or wrong, is refused before its token is checked; nothing was done; try again after Retry-After."
		if op.RateLimited {
			why = "Too many of these calls from this caller (token or session) or this address in a short time, or too many calls with a wrong API token from this address (RATE_LIMITED): nothing was done; try again after Retry-After."
		}
		limited := problem(why)
		limited["headers"] = map[string]any{"Retry-After": map[string]any{"description": "Seconds to wait before trying again.",
			"required": true, "schema": map[string]any{"type": "integer", "minimum": 1}}}
		responses["429"] = limited
		if op.Mutating {
			responses["409"] = problem("A conflict: the evidence changed (STALE_EVIDENCE), the time to decide ran out (APPROVAL_EXPIRED), or a change made meanwhile.")
		}
		if op.Conflict != "" {
			responses["409"] = problem(op.Conflict)
		}
		if op.Ranged {
			rangedResponses(responses, ok, problem)
		}
		o := map[string]any{"operationId": op.ID, "summary": op.Summary, "tags": []string{op.Tag},
			"parameters": params, "responses": responses, "x-gantry-scope": op.Scope}
		if op.Body != nil {
			o["requestBody"] = map[string]any{"required": true,
				"content": map[string]any{"application/json": map[string]any{"schema": r.schema(reflect.TypeOf(op.Body))}}}
		}
		if pathItems[p] == nil {
			pathItems[p] = map[string]any{}
		}
		pathItems[p][strings.ToLower(op.Method)] = o
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{"title": "Gantry API", "version": version,
			"description": "Gantry's JSON API: the same services and checks as the pages. Errors are RFC 9457 problem documents with a stable code. See docs/api.md."},
		"servers":    []any{map[string]any{"url": "/"}},
		"security":   []any{map[string]any{"bearer": []string{}}},
		"paths":      pathItems,
		"components": map[string]any{"schemas": schemas, "securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "gantry_<id>.<secret>"}}},
	}
	return json.MarshalIndent(doc, "", "  ")
}

// reflector turns Go types into JSON Schema (2020-12, as OpenAPI 3.1 uses): named
// structs become components referenced by $ref; a field is required unless its tag
// says omitempty; a pointer may also be null.
type reflector struct {
	schemas map[string]any
	named   map[string]reflect.Type
}

// SchemaName is the component name of a named Go type: its name without the handlers'
// "api" prefix, capitalized (apiRun: Run).
func SchemaName(t reflect.Type) string {
	name := strings.TrimPrefix(t.Name(), "api")
	if name == "" {
		return t.Name()
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

var (
	timeType = reflect.TypeOf(time.Time{})
	rawType  = reflect.TypeOf(json.RawMessage{})
)

// Enumerated is a string type whose values are a closed set: its schema lists them
// (the set comes from the code, so the description cannot drift from it).
type Enumerated interface{ OpenAPIEnum() []string }

var enumeratedType = reflect.TypeOf((*Enumerated)(nil)).Elem()

func (r reflector) schema(t reflect.Type) map[string]any {
	switch {
	case t.Kind() == reflect.String && t.Implements(enumeratedType):
		return map[string]any{"type": "string", "enum": reflect.Zero(t).Interface().(Enumerated).OpenAPIEnum()}
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return map[string]any{} // any JSON value
	}
	switch t.Kind() {
	case reflect.Pointer:
		s := r.schema(t.Elem())
		if ref, ok := s["$ref"]; ok {
			return map[string]any{"anyOf": []any{map[string]any{"$ref": ref}, map[string]any{"type": "null"}}}
		}
		if typ, ok := s["type"].(string); ok {
			s["type"] = []string{typ, "null"}
		}
		return s
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Slice, reflect.Array:
		return map[string]any{"type": "array", "items": r.schema(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": r.schema(t.Elem())}
	case reflect.Interface:
		return map[string]any{}
	case reflect.Struct:
		if t.Name() == "" {
			return r.object(t)
		}
		name := SchemaName(t)
		if other, ok := r.named[name]; ok && other != t {
			panic(fmt.Sprintf("openapi: %s and %s would both be schema %s", other, t, name))
		}
		r.named[name] = t
		if _, done := r.schemas[name]; !done {
			r.schemas[name] = map[string]any{} // a placeholder while recursing
			r.schemas[name] = r.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	panic(fmt.Sprintf("openapi: no schema for %s", t))
}

func (r reflector) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []string{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			inner := r.object(f.Type)
			for k, v := range inner["properties"].(map[string]any) {
				props[k] = v
			}
			required = append(required, inner["required"].([]string)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		s := r.schema(f.Type)
		if doc := f.Tag.Get("doc"); doc != "" {
			if _, isRef := s["$ref"]; isRef {
				s = map[string]any{"allOf": []any{s}, "description": doc}
			} else {
				s["description"] = doc
			}
		}
		props[name] = s
		if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	return map[string]any{"type": "object", "properties": props, "required": required}
}
