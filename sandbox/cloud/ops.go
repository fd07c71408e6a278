package cloud

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"gantry/sandbox/api"
)

// refs are the attributes that name another object, and the kind they name.
var refs = map[string]string{"network_id": "network", "subnet_id": "subnet"}

// visible reports whether the identity may see the object: its own workspace namespace (every
// workspace of its environment for a static API key), or its organization for org-scoped kinds.
func visible(k api.Kind, who Identity, obj *api.Object) bool {
	if k.OrgScoped {
		return obj.Namespace.Org == who.Org
	}
	if who.Static() {
		return obj.Namespace.Org == who.Org && obj.Namespace.Env == who.Env
	}
	return obj.Namespace == who.Namespace()
}

// namespaceFor is where the identity creates objects of kind k.
func namespaceFor(k api.Kind, who Identity) api.Namespace {
	if k.OrgScoped {
		return api.Namespace{Org: who.Org}
	}
	return who.Namespace()
}

// lookup loads an object the identity may see; anything else is 404.
func (s *Server) lookup(k api.Kind, who Identity, id string) (*api.Object, error) {
	obj, err := s.store.load(k, id)
	if errors.Is(err, errNotFound) || (err == nil && !visible(k, who, obj)) {
		return nil, notFound(k, id)
	}
	return obj, err
}

// readAttributes decodes, normalizes and validates a write request's attributes.
func readAttributes(req *request) (map[string]any, string, error) {
	var body api.WriteRequest
	if err := decodeBody(req.r, &body); err != nil {
		return nil, "", err
	}
	if body.Attributes == nil {
		return nil, "", &httpError{status: http.StatusBadRequest, code: api.CodeBadRequest, msg: `the request body needs an "attributes" object`}
	}
	attrs, err := req.kind.Normalize(body.Attributes, false)
	if err != nil {
		return nil, "", invalid(err)
	}
	return attrs, body.Reason, nil
}

func (s *Server) listObjects(w http.ResponseWriter, req *request) error {
	all, err := s.store.list(req.kind)
	if err != nil {
		return err
	}
	out := api.ObjectList{Objects: []api.Object{}}
	for _, obj := range all {
		if visible(req.kind, req.who, obj) {
			out.Objects = append(out.Objects, *obj)
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) getObject(w http.ResponseWriter, req *request) error {
	obj, err := s.lookup(req.kind, req.who, req.id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, obj)
	return nil
}

func (s *Server) createObject(w http.ResponseWriter, req *request) error {
	attrs, _, err := readAttributes(req)
	if err != nil {
		return err
	}
	if err := req.kind.Validate(attrs); err != nil {
		return invalid(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := namespaceFor(req.kind, req.who)
	if err := s.checkRefs(req.kind, ns, attrs, nil); err != nil {
		return err
	}
	id, err := s.newID(req.kind)
	if err != nil {
		return err
	}
	attrs["id"] = id
	if err := s.compute(req.kind, ns, attrs, nil); err != nil {
		return err
	}
	now := time.Now().UTC()
	obj := &api.Object{
		ID: id, Kind: req.kind.Name, Namespace: ns, Attributes: attrs,
		Generation: 1, CreatedAt: now, UpdatedAt: now,
		LastChange: s.runChange(req.who, "create", now),
	}
	if req.kind.DataBearing {
		obj.Data = &api.Data{Version: "dv-" + randomHex(8)}
	}
	if err := s.store.save(req.kind, obj); err != nil {
		return err
	}
	if err := s.history.record(req.kind, obj, changeBy(req.who, "create", obj.Generation, now), false); err != nil {
		return err
	}
	s.log.Info("sandbox cloud: created", "type", req.kind.TypeName(), "id", id, "namespace", ns.String(), "run", req.who.Run, "window", req.who.Window, "phase", req.who.Phase, "key", req.who.KeyID)
	writeJSON(w, http.StatusCreated, obj)
	return nil
}

func (s *Server) updateObject(w http.ResponseWriter, req *request) error {
	attrs, _, err := readAttributes(req)
	if err != nil {
		return err
	}
	if err := req.kind.Validate(attrs); err != nil {
		return invalid(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, err := s.lookup(req.kind, req.who, req.id)
	if err != nil {
		return err
	}
	if changed := req.kind.ReplaceAttrs(obj.Attributes, attrs); len(changed) > 0 {
		return conflict("%s %s: %v cannot change in place; the object must be replaced (destroyed and created again)", req.kind.TypeName(), req.id, changed)
	}
	if err := s.checkUpdate(req.kind, obj, attrs); err != nil {
		return err
	}
	if err := s.checkRefs(req.kind, obj.Namespace, attrs, obj); err != nil {
		return err
	}
	for _, a := range req.kind.Attrs {
		if a.Computed {
			attrs[a.Name] = obj.Attributes[a.Name] // the cloud keeps computed values for the object's life
		}
	}
	now := time.Now().UTC()
	obj.Attributes = attrs
	obj.Generation++
	obj.UpdatedAt = now
	obj.LastChange = s.runChange(req.who, "update", now)
	if err := s.store.save(req.kind, obj); err != nil {
		return err
	}
	if err := s.history.record(req.kind, obj, changeBy(req.who, "update", obj.Generation, now), false); err != nil {
		return err
	}
	s.log.Info("sandbox cloud: updated", "type", req.kind.TypeName(), "id", obj.ID, "namespace", obj.Namespace.String(), "run", req.who.Run, "window", req.who.Window, "phase", req.who.Phase, "key", req.who.KeyID)
	writeJSON(w, http.StatusOK, obj)
	return nil
}

func (s *Server) deleteObject(w http.ResponseWriter, req *request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj, err := s.lookup(req.kind, req.who, req.id)
	if err != nil {
		return err
	}
	if dep, err := s.dependent(req.kind, obj); err != nil {
		return err
	} else if dep != "" {
		return conflict("%s %s is still used by %s; delete that first", req.kind.TypeName(), obj.ID, dep)
	}
	if err := s.store.remove(req.kind, obj.ID); err != nil {
		return err
	}
	if err := s.history.record(req.kind, obj, changeBy(req.who, "delete", 0, time.Now().UTC()), true); err != nil {
		return err
	}
	s.log.Info("sandbox cloud: deleted", "type", req.kind.TypeName(), "id", obj.ID, "namespace", obj.Namespace.String(), "run", req.who.Run, "window", req.who.Window, "phase", req.who.Phase, "key", req.who.KeyID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) runChange(who Identity, action string, at time.Time) api.Change {
	rec := changeBy(who, action, 0, at)
	return api.Change{By: rec.By, Action: action, Subject: who.Subject, Run: rec.Run, Phase: rec.Phase, At: at}
}

// checkRefs checks that referenced objects exist in the namespace and fit together. On update,
// prior is the live object: references that did not change are not checked again.
func (s *Server) checkRefs(k api.Kind, ns api.Namespace, attrs map[string]any, prior *api.Object) error {
	var fields []api.FieldError
	found := map[string]*api.Object{}
	for _, a := range k.Attrs {
		refKind, ok := refs[a.Name]
		id, set := attrs[a.Name].(string)
		if !ok || !set || (prior != nil && api.Equal(prior.Attributes[a.Name], attrs[a.Name])) {
			continue
		}
		rk, _ := api.Lookup(refKind)
		obj, err := s.store.load(rk, id)
		if errors.Is(err, errNotFound) || (err == nil && obj.Namespace != ns) {
			fields = append(fields, api.FieldError{Attr: a.Name, Message: fmt.Sprintf("%s %s not found", rk.TypeName(), id)})
			continue
		}
		if err != nil {
			return err
		}
		found[a.Name] = obj
	}
	if net, sub := found["network_id"], found["subnet_id"]; net != nil && sub != nil && sub.Attributes["network_id"] != net.ID {
		fields = append(fields, api.FieldError{Attr: "subnet_id", Message: fmt.Sprintf("subnet %s belongs to network %v, not %s", sub.ID, sub.Attributes["network_id"], net.ID)})
	}
	if net := found["network_id"]; k.Name == "subnet" && net != nil {
		netCIDR, _ := api.ParseCIDR(net.Attributes["cidr"].(string))
		subCIDR, _ := api.ParseCIDR(attrs["cidr"].(string))
		if !contains(netCIDR, subCIDR) {
			fields = append(fields, api.FieldError{Attr: "cidr", Message: fmt.Sprintf("%s does not lie inside network %s's range %s", subCIDR, net.ID, netCIDR)})
		}
	}
	if len(fields) > 0 {
		return &httpError{status: http.StatusUnprocessableEntity, code: api.CodeInvalid, msg: (&api.ValidationError{Kind: k.TypeName(), Fields: fields}).Error(), fields: fields}
	}
	return nil
}

// checkUpdate applies the in-place update rules of each kind.
func (s *Server) checkUpdate(k api.Kind, obj *api.Object, next map[string]any) error {
	switch k.Name {
	case "database":
		before, _ := obj.Attributes["storage_gb"].(int64)
		after, _ := next["storage_gb"].(int64)
		if after < before {
			return conflict("%s %s: storage_gb can grow but never shrink (%d to %d)", k.TypeName(), obj.ID, before, after)
		}
	case "network":
		if api.Equal(obj.Attributes["cidr"], next["cidr"]) {
			return nil
		}
		netCIDR, _ := api.ParseCIDR(next["cidr"].(string))
		subnets, err := s.referrers("subnet", "network_id", obj)
		if err != nil {
			return err
		}
		for _, sub := range subnets {
			subCIDR, _ := api.ParseCIDR(sub.Attributes["cidr"].(string))
			if !contains(netCIDR, subCIDR) {
				return conflict("%s %s: the new range %s would not hold subnet %s (%s)", k.TypeName(), obj.ID, netCIDR, sub.ID, subCIDR)
			}
		}
	}
	return nil
}

// dependent names an object in the same namespace that still references obj ("" if none).
func (s *Server) dependent(k api.Kind, obj *api.Object) (string, error) {
	for attr, target := range refs {
		if target != k.Name {
			continue
		}
		for _, kind := range api.Kinds() {
			if _, ok := kind.Attr(attr); !ok {
				continue
			}
			users, err := s.referrers(kind.Name, attr, obj)
			if err != nil {
				return "", err
			}
			if len(users) > 0 {
				return kind.TypeName() + " " + users[0].ID, nil
			}
		}
	}
	return "", nil
}

// referrers lists objects of a kind in obj's namespace whose attribute attr is obj's id.
func (s *Server) referrers(kind, attr string, obj *api.Object) ([]*api.Object, error) {
	k, _ := api.Lookup(kind)
	all, err := s.store.list(k)
	if err != nil {
		return nil, err
	}
	var out []*api.Object
	for _, o := range all {
		if o.Namespace == obj.Namespace && o.Attributes[attr] == obj.ID {
			out = append(out, o)
		}
	}
	return out, nil
}

// compute sets the computed attributes of a new object (prior nil) or refreshes the ones derived
// from attributes an out-of-band change may have touched.
func (s *Server) compute(k api.Kind, ns api.Namespace, attrs map[string]any, prior *api.Object) error {
	name, _ := attrs["name"].(string)
	switch k.Name {
	case "database":
		engine, _ := attrs["engine"].(string)
		attrs["endpoint"] = fmt.Sprintf("%s.db.sandbox.internal:%d", name, api.EnginePorts[engine])
	case "bucket":
		attrs["url"] = "https://" + name + ".bucket.sandbox.internal"
	case "instance":
		if prior != nil && api.Equal(prior.Attributes["subnet_id"], attrs["subnet_id"]) {
			attrs["private_ip"] = prior.Attributes["private_ip"]
			return nil
		}
		ip, err := s.allocateIP(ns, attrs["subnet_id"].(string))
		if err != nil {
			return err
		}
		attrs["private_ip"] = ip
	}
	return nil
}

// allocateIP picks a free host address in the subnet (not its network or broadcast address).
func (s *Server) allocateIP(ns api.Namespace, subnetID string) (string, error) {
	subKind, _ := api.Lookup("subnet")
	sub, err := s.store.load(subKind, subnetID)
	if err != nil || sub.Namespace != ns {
		return "", &httpError{status: http.StatusUnprocessableEntity, code: api.CodeInvalid, msg: fmt.Sprintf("sandbox_subnet %s not found", subnetID)}
	}
	prefix, err := api.ParseCIDR(sub.Attributes["cidr"].(string))
	if err != nil {
		return "", err
	}
	users, err := s.referrers("instance", "subnet_id", sub)
	if err != nil {
		return "", err
	}
	used := map[string]bool{}
	for _, u := range users {
		if ip, ok := u.Attributes["private_ip"].(string); ok {
			used[ip] = true
		}
	}
	hosts := uint32(1)<<(32-prefix.Bits()) - 2
	base := binary.BigEndian.Uint32(prefix.Addr().AsSlice())
	start := randomUint32() % hosts
	for i := uint32(0); i < hosts; i++ {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], base+1+(start+i)%hosts)
		ip := netip.AddrFrom4(b).String()
		if !used[ip] {
			return ip, nil
		}
	}
	return "", conflict("sandbox_subnet %s has no free address left", subnetID)
}

// newID returns an unused id such as db-1a2b3c4d.
func (s *Server) newID(k api.Kind) (string, error) {
	for range 100 {
		id := k.IDPrefix + "-" + randomHex(4)
		if !s.store.exists(k, id) {
			return id, nil
		}
	}
	return "", errors.New("no free id")
}

func contains(outer, inner netip.Prefix) bool {
	return outer.Bits() <= inner.Bits() && outer.Contains(inner.Addr())
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func randomUint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}
