package mock

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// tofuVersion is the OpenTofu version the mock imitates.
const tofuVersion = "1.10.10"

// stateFile is tofu's state format, version 4.
type stateFile struct {
	Version          int                    `json:"version"`
	TerraformVersion string                 `json:"terraform_version"`
	Serial           uint64                 `json:"serial"`
	Lineage          string                 `json:"lineage"`
	Outputs          map[string]stateOutput `json:"outputs"`
	Resources        []stateResource        `json:"resources"`
	CheckResults     json.RawMessage        `json:"check_results"`
}

type stateOutput struct {
	Value     json.RawMessage `json:"value"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

type stateResource struct {
	Module    string          `json:"module,omitempty"`
	Mode      string          `json:"mode"`
	Type      string          `json:"type"`
	Name      string          `json:"name"`
	Provider  string          `json:"provider"`
	Instances []stateInstance `json:"instances"`
}

type stateInstance struct {
	IndexKey            *int            `json:"index_key,omitempty"`
	SchemaVersion       uint64          `json:"schema_version"`
	Attributes          json.RawMessage `json:"attributes"`
	SensitiveAttributes json.RawMessage `json:"sensitive_attributes"`
	Dependencies        []string        `json:"dependencies,omitempty"`
	CreateBeforeDestroy bool            `json:"create_before_destroy,omitempty"`
}

// instanceAddr is a resource instance's address; index is -1 without count.
type instanceAddr struct {
	module, typ, name string
	index             int
}

// String is the absolute address: module.postgres.sandbox_subnet.this[0].
func (a instanceAddr) String() string {
	s := a.resource()
	if a.index >= 0 {
		s += "[" + strconv.Itoa(a.index) + "]"
	}
	return s
}

// resource is the address without the index: module.postgres.sandbox_subnet.this.
func (a instanceAddr) resource() string {
	return "module." + a.module + "." + a.typ + "." + a.name
}

func (a instanceAddr) moduleAddress() string { return "module." + a.module }

// less orders addresses as tofu does: module, type, name, then index by number.
func (a instanceAddr) less(b instanceAddr) bool {
	switch {
	case a.module != b.module:
		return a.module < b.module
	case a.typ != b.typ:
		return a.typ < b.typ
	case a.name != b.name:
		return a.name < b.name
	}
	return a.index < b.index
}

// instance is one resource instance with its value: in a prior state, or the
// result of an apply.
type instance struct {
	addr  instanceAddr
	value cty.Value // an object of the resource type's schema, unmarked
	deps  []string  // absolute resource addresses it depends on, sorted
	cbd   bool
	// sensitive are the paths of value's sensitive parts (sensitive_attributes).
	sensitive []cty.Path
}

// priorState is a decoded state file.
type priorState struct {
	serial    uint64
	lineage   string
	instances map[string]*instance // by address
	outputs   map[string]cty.Value
	sensitive map[string]bool
}

func (p *priorState) empty() bool { return len(p.instances) == 0 && len(p.outputs) == 0 }

// sortedInstances lists the instances in address order.
func (p *priorState) sortedInstances() []*instance {
	out := make([]*instance, 0, len(p.instances))
	for _, in := range p.instances {
		out = append(out, in)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr.less(out[j].addr) })
	return out
}

// parseState decodes a state v4 file; no data means no state yet.
func parseState(data []byte) (*priorState, error) {
	p := &priorState{instances: map[string]*instance{}, outputs: map[string]cty.Value{}, sensitive: map[string]bool{}}
	if len(bytes.TrimSpace(data)) == 0 {
		return p, nil
	}
	var f stateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("reading the prior state: %w", err)
	}
	if f.Version != 4 {
		return nil, fmt.Errorf("reading the prior state: format version %d is not supported (the mock runner reads version 4)", f.Version)
	}
	p.serial, p.lineage = f.Serial, f.Lineage
	for name, o := range f.Outputs {
		v, err := decodeOutput(o)
		if err != nil {
			return nil, fmt.Errorf("reading the prior state: output %q: %w", name, err)
		}
		p.outputs[name], p.sensitive[name] = v, o.Sensitive
	}
	for _, r := range f.Resources {
		if err := p.addResource(r); err != nil {
			return nil, fmt.Errorf("reading the prior state: %w", err)
		}
	}
	return p, nil
}

func decodeOutput(o stateOutput) (cty.Value, error) {
	t, err := ctyjson.UnmarshalType(o.Type)
	if err != nil {
		return cty.NilVal, err
	}
	return ctyjson.Unmarshal(o.Value, t)
}

func (p *priorState) addResource(r stateResource) error {
	module, ok := strings.CutPrefix(r.Module, "module.")
	if !ok || strings.ContainsAny(module, ".[") {
		return fmt.Errorf("resource %s.%s is in %q; the mock runner only knows resources in module calls of the root module", r.Type, r.Name, r.Module)
	}
	if r.Mode != "managed" {
		return fmt.Errorf("%s: %s resources are not supported by the mock runner", r.Module, r.Mode)
	}
	schema, ok := schemas[r.Type]
	if !ok {
		return fmt.Errorf("%s.%s.%s: unsupported resource type %q", r.Module, r.Type, r.Name, r.Type)
	}
	for _, si := range r.Instances {
		addr := instanceAddr{module: module, typ: r.Type, name: r.Name, index: -1}
		if si.IndexKey != nil {
			addr.index = *si.IndexKey
		}
		v, err := ctyjson.Unmarshal(si.Attributes, schema.objectType())
		if err != nil {
			return fmt.Errorf("%s: attributes do not match the %s schema: %w", addr, r.Type, err)
		}
		sensitive, err := decodeSensitivePaths(si.SensitiveAttributes)
		if err != nil {
			return fmt.Errorf("%s: %w", addr, err)
		}
		p.instances[addr.String()] = &instance{addr: addr, value: v, deps: si.Dependencies, cbd: si.CreateBeforeDestroy, sensitive: sensitive}
	}
	return nil
}

// encodeState writes a state v4 file as tofu does: sorted resources, indented,
// with a final newline.
func encodeState(serial uint64, lineage string, instances []*instance, outputs map[string]outputValue) ([]byte, error) {
	f := stateFile{
		Version: 4, TerraformVersion: tofuVersion, Serial: serial, Lineage: lineage,
		Outputs: map[string]stateOutput{}, Resources: []stateResource{}, CheckResults: json.RawMessage("null"),
	}
	for name, o := range outputs {
		if o.value.IsNull() {
			continue // tofu does not store null outputs
		}
		f.Outputs[name] = stateOutput{Value: marshalValue(o.value), Type: marshalType(o.value.Type()), Sensitive: o.sensitive}
	}
	sorted := append([]*instance(nil), instances...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].addr.less(sorted[j].addr) })
	for _, in := range sorted {
		si := stateInstance{
			SchemaVersion: 0, Attributes: marshalValue(in.value), SensitiveAttributes: encodeSensitivePaths(in.sensitive),
			Dependencies: in.deps, CreateBeforeDestroy: in.cbd,
		}
		if in.addr.index >= 0 {
			idx := in.addr.index
			si.IndexKey = &idx
		}
		n := len(f.Resources)
		if n == 0 || f.Resources[n-1].Module != in.addr.moduleAddress() || f.Resources[n-1].Type != in.addr.typ || f.Resources[n-1].Name != in.addr.name {
			f.Resources = append(f.Resources, stateResource{Module: in.addr.moduleAddress(), Mode: "managed", Type: in.addr.typ, Name: in.addr.name, Provider: stateProvider})
			n++
		}
		f.Resources[n-1].Instances = append(f.Resources[n-1].Instances, si)
	}
	out, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the new state: %w", err)
	}
	return append(out, '\n'), nil
}

// newLineage is the lineage of a workspace's first state: uuid-shaped, derived
// from the workspace id so the same workspace always gets the same one.
func newLineage(workspaceID string) string {
	sum := sha256.Sum256([]byte("gantry-mock-lineage\x00" + workspaceID))
	h := hex.EncodeToString(sum[:16])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// outputValue is an output's value and whether it is sensitive.
type outputValue struct {
	value     cty.Value
	sensitive bool
}
