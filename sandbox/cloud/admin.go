package cloud

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"gantry/sandbox/api"
)

// The break-glass admin API changes objects outside any run: drift tests and the manual change
// path use it. It sees every namespace. Its changes are recorded in the object (last_change with
// by "admin" and the given reason) and logged at warning level.

func (s *Server) adminLookup(k api.Kind, id string) (*api.Object, error) {
	obj, err := s.store.load(k, id)
	if errors.Is(err, errNotFound) {
		return nil, notFound(k, id)
	}
	return obj, err
}

func (s *Server) adminList(w http.ResponseWriter, req *request) error {
	all, err := s.store.list(req.kind)
	if err != nil {
		return err
	}
	out := api.ObjectList{Objects: make([]api.Object, 0, len(all))}
	for _, obj := range all {
		out.Objects = append(out.Objects, *obj)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) adminGet(w http.ResponseWriter, req *request) error {
	obj, err := s.adminLookup(req.kind, req.id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, obj)
	return nil
}

// adminUpdate merges the given attributes into the object (null clears an attribute). Any
// configurable attribute may change, including ones that force replacement in a run: that is
// what break-glass means. Values are still validated; references are not.
func (s *Server) adminUpdate(w http.ResponseWriter, req *request) error {
	var body api.WriteRequest
	if err := decodeBody(req.r, &body); err != nil {
		return err
	}
	if len(body.Attributes) == 0 {
		return &httpError{status: http.StatusBadRequest, code: api.CodeBadRequest, msg: `the request body needs an "attributes" object with the attributes to change`}
	}
	patch, err := req.kind.Normalize(body.Attributes, false)
	if err != nil {
		return invalid(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, err := s.adminLookup(req.kind, req.id)
	if err != nil {
		return err
	}
	attrs := make(map[string]any, len(obj.Attributes))
	for name, v := range obj.Attributes {
		attrs[name] = v
	}
	var changed []string
	for name := range body.Attributes {
		if a, _ := req.kind.Attr(name); a.Computed {
			continue // the cloud sets these
		}
		if !api.Equal(attrs[name], patch[name]) {
			changed = append(changed, name)
		}
		attrs[name] = patch[name]
	}
	if err := req.kind.Validate(attrs); err != nil {
		return invalid(err)
	}
	if err := s.compute(req.kind, obj.Namespace, attrs, obj); err != nil {
		return err
	}
	now := time.Now().UTC()
	obj.Attributes = attrs
	obj.Generation++
	obj.UpdatedAt = now
	obj.LastChange = api.Change{By: "admin", Action: "update", Reason: body.Reason, At: now}
	if err := s.store.save(req.kind, obj); err != nil {
		return err
	}
	if err := s.history.record(req.kind, obj, adminChange("update", body.Reason, obj.Generation, now), false); err != nil {
		return err
	}
	s.log.Warn("sandbox cloud: out-of-band change through the admin API", "type", req.kind.TypeName(), "id", obj.ID, "namespace", obj.Namespace.String(), "attributes", fmt.Sprint(changed), "reason", body.Reason)
	writeJSON(w, http.StatusOK, obj)
	return nil
}

// adminDelete deletes an object regardless of references to it.
func (s *Server) adminDelete(w http.ResponseWriter, req *request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, err := s.adminLookup(req.kind, req.id)
	if err != nil {
		return err
	}
	if err := s.store.remove(req.kind, obj.ID); err != nil {
		return err
	}
	if err := s.history.record(req.kind, obj, adminChange("delete", req.r.URL.Query().Get("reason"), 0, time.Now().UTC()), true); err != nil {
		return err
	}
	s.log.Warn("sandbox cloud: out-of-band delete through the admin API", "type", req.kind.TypeName(), "id", obj.ID, "namespace", obj.Namespace.String(), "reason", req.r.URL.Query().Get("reason"))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// adminWriteData writes the fake data marker of a data-bearing object ("rows were written").
// A replacement creates a new object with a new data version and no marker: the data is gone.
func (s *Server) adminWriteData(w http.ResponseWriter, req *request) error {
	if !req.kind.DataBearing {
		return &httpError{status: http.StatusBadRequest, code: api.CodeBadRequest, msg: req.kind.TypeName() + " holds no data"}
	}
	var body api.DataRequest
	if err := decodeBody(req.r, &body); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, err := s.adminLookup(req.kind, req.id)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	if obj.Data == nil {
		obj.Data = &api.Data{Version: "dv-" + randomHex(8)}
	}
	obj.Data.Marker = body.Marker
	obj.Data.WrittenAt = &now
	obj.UpdatedAt = now
	obj.LastChange = api.Change{By: "admin", Action: "data", Reason: body.Reason, At: now}
	if err := s.store.save(req.kind, obj); err != nil {
		return err
	}
	if err := s.history.record(req.kind, obj, adminChange("data", body.Reason, obj.Generation, now), false); err != nil {
		return err
	}
	s.log.Info("sandbox cloud: data written through the admin API", "type", req.kind.TypeName(), "id", obj.ID, "namespace", obj.Namespace.String())
	writeJSON(w, http.StatusOK, obj)
	return nil
}
