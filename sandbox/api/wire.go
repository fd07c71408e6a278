package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Namespace is where an object lives. Workspace-scoped objects live in (org, env, workspace);
// org-scoped objects (sandbox_org_policy) only name the organization.
type Namespace struct {
	Org       string `json:"org"`
	Env       string `json:"env,omitempty"`
	Workspace string `json:"workspace,omitempty"`
}

func (n Namespace) String() string {
	if n.Env == "" && n.Workspace == "" {
		return n.Org
	}
	return n.Org + "/" + n.Env + "/" + n.Workspace
}

// Object is a live resource as the API returns it and as the cloud stores it (one JSON file per
// object). Attributes holds every attribute of the kind, configurable and computed; null values
// are JSON null.
type Object struct {
	ID         string         `json:"id"`
	Kind       string         `json:"kind"`
	Namespace  Namespace      `json:"namespace"`
	Attributes map[string]any `json:"attributes"`
	// Generation counts changes: 1 on create, +1 on every update (by a run or out of band).
	Generation int64     `json:"generation"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// Data is the fake payload of a data-bearing kind (database, bucket). Its Version is new for
	// every object, so a replacement visibly starts with empty data.
	Data       *Data  `json:"data,omitempty"`
	LastChange Change `json:"last_change"`
}

// Data is the simulated content of a data-bearing object.
type Data struct {
	Version   string     `json:"version"`          // random, fixed for the object's life
	Marker    string     `json:"marker,omitempty"` // written through the admin API ("rows written")
	WrittenAt *time.Time `json:"written_at,omitempty"`
}

// Change records who last changed an object. It never holds a credential.
type Change struct {
	By      string    `json:"by"`                // "run" (a workload identity) or "admin" (out of band)
	Action  string    `json:"action"`            // "create", "update" or "data"
	Subject string    `json:"subject,omitempty"` // the token's sub claim
	Run     string    `json:"run,omitempty"`
	Phase   string    `json:"phase,omitempty"`
	Reason  string    `json:"reason,omitempty"` // admin changes: why
	At      time.Time `json:"at"`
}

// WriteRequest is the body of POST /v1/{kind}, PUT /v1/{kind}/{id} and PUT /admin/v1/{kind}/{id}.
type WriteRequest struct {
	Attributes map[string]any `json:"attributes"`
	Reason     string         `json:"reason,omitempty"` // admin API only
}

// DataRequest is the body of PUT /admin/v1/{kind}/{id}/data.
type DataRequest struct {
	Marker string `json:"marker"`
	Reason string `json:"reason,omitempty"`
}

// ObjectList is the body of GET /v1/{kind} and GET /admin/v1/{kind}.
type ObjectList struct {
	Objects []Object `json:"objects"`
}

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong. Fields lists attribute problems of an invalid request.
type ErrorDetail struct {
	Code    string       `json:"code"`
	Message string       `json:"message"`
	Fields  []FieldError `json:"fields,omitempty"`
}

// Error codes.
const (
	CodeUnauthenticated   = "unauthenticated"    // 401: no, bad or expired token
	CodeForbidden         = "forbidden"          // 403: the token's scope does not allow this
	CodeNotFound          = "not_found"          // 404: no such object in the caller's namespace
	CodeInvalid           = "invalid"            // 422: attribute problems (see Fields)
	CodeConflict          = "conflict"           // 409: the change conflicts with the live object
	CodeBadRequest        = "bad_request"        // 400: malformed request
	CodeIssuerUnavailable = "issuer_unavailable" // 503: the identity issuer cannot be reached yet
	CodeAdminDisabled     = "admin_disabled"     // 404: the cloud was started without an admin token
	CodeInternal          = "internal"           // 500
)

// DecodeObject decodes an object and normalizes its attributes (numbers become int64).
func DecodeObject(body []byte) (Object, error) {
	var obj Object
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&obj); err != nil {
		return Object{}, fmt.Errorf("decoding a sandbox object: %w", err)
	}
	if err := obj.normalize(); err != nil {
		return Object{}, err
	}
	return obj, nil
}

// DecodeObjectList decodes a list of objects.
func DecodeObjectList(body []byte) (ObjectList, error) {
	var raw struct {
		Objects []json.RawMessage `json:"objects"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return ObjectList{}, fmt.Errorf("decoding a list of sandbox objects: %w", err)
	}
	list := ObjectList{Objects: make([]Object, 0, len(raw.Objects))}
	for _, r := range raw.Objects {
		obj, err := DecodeObject(r)
		if err != nil {
			return ObjectList{}, err
		}
		list.Objects = append(list.Objects, obj)
	}
	return list, nil
}

func (o *Object) normalize() error {
	k, ok := Lookup(o.Kind)
	if !ok {
		return fmt.Errorf("sandbox object %s: unknown kind %q", o.ID, o.Kind)
	}
	attrs, err := k.Normalize(o.Attributes, true)
	if err != nil {
		return fmt.Errorf("sandbox object %s: %w", o.ID, err)
	}
	o.Attributes = attrs
	return nil
}
