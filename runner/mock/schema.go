package mock

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sort"

	"github.com/zclconf/go-cty/cty"
)

// This file is the mock's copy of the sandbox provider's schema. It must match
// the real provider (portal.local/sandbox/sandbox): the attributes, their types,
// which ones the provider computes and which ones force replacement. A plan the
// mock makes is only a faithful preview while both agree.

// providerSource is the sandbox provider's address, as tofu prints it.
const providerSource = "portal.local/sandbox/sandbox"

// stateProvider is the provider address as the state file records it.
const stateProvider = `provider["` + providerSource + `"]`

// attribute is one attribute of a resource type.
type attribute struct {
	typ cty.Type
	// computed: set by the provider, never by configuration. The mock assumes the
	// provider keeps a computed value for the life of the object (the framework's
	// UseStateForUnknown), so it is unknown only on create and replace.
	computed bool
	// forcesReplacement: a change cannot be made in place (RequiresReplace).
	forcesReplacement bool
}

// resourceSchema describes one resource type.
type resourceSchema struct {
	idPrefix string
	attrs    map[string]attribute
}

// objectType is the cty type of a whole resource object.
func (s resourceSchema) objectType() cty.Type {
	types := make(map[string]cty.Type, len(s.attrs))
	for name, a := range s.attrs {
		types[name] = a.typ
	}
	return cty.Object(types)
}

// attrNames lists the attribute names in sorted order.
func (s resourceSchema) attrNames() []string {
	names := make([]string, 0, len(s.attrs))
	for name := range s.attrs {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

var (
	str      = attribute{typ: cty.String}
	strNew   = attribute{typ: cty.String, forcesReplacement: true}
	num      = attribute{typ: cty.Number}
	boolean  = attribute{typ: cty.Bool}
	boolNew  = attribute{typ: cty.Bool, forcesReplacement: true}
	labels   = attribute{typ: cty.Map(cty.String)}
	computed = attribute{typ: cty.String, computed: true}
)

// schemas is the sandbox provider's resource types.
var schemas = map[string]resourceSchema{
	"sandbox_network": {idPrefix: "net", attrs: map[string]attribute{
		"id": computed, "name": strNew, "cidr": str, "region": strNew, "labels": labels,
	}},
	"sandbox_subnet": {idPrefix: "subnet", attrs: map[string]attribute{
		"id": computed, "network_id": strNew, "name": str, "cidr": strNew,
	}},
	"sandbox_database": {idPrefix: "db", attrs: map[string]attribute{
		"id": computed, "endpoint": computed,
		"name": strNew, "engine": strNew, "engine_version": strNew,
		"size": str, "storage_gb": num, "backup_retention_days": num,
		"encrypted": boolNew, "network_id": strNew, "subnet_id": strNew, "labels": labels,
	}},
	"sandbox_bucket": {idPrefix: "bkt", attrs: map[string]attribute{
		"id": computed, "url": computed,
		"name": strNew, "region": strNew,
		"versioning": boolean, "retention_days": num, "public": boolean, "labels": labels,
	}},
	"sandbox_instance": {idPrefix: "i", attrs: map[string]attribute{
		"id": computed, "private_ip": computed,
		"name": str, "size": str, "image": strNew, "subnet_id": strNew,
	}},
	"sandbox_org_policy": {idPrefix: "pol", attrs: map[string]attribute{
		"id": computed, "name": strNew, "rules": {typ: cty.List(cty.String)},
	}},
}

// computeValue is what the simulated provider sets a computed attribute to when
// it creates an object. seed makes ids unique per workspace, address and state
// serial, so a replaced object gets a new id as it would in a real cloud.
func computeValue(typeName, attr string, obj map[string]cty.Value, seed string) cty.Value {
	sum := sha256.Sum256([]byte(seed))
	name := ""
	if v, ok := obj["name"]; ok && v.IsKnown() && !v.IsNull() {
		name = v.AsString()
	}
	switch attr {
	case "id":
		return cty.StringVal(schemas[typeName].idPrefix + "-" + hex.EncodeToString(sum[:4]))
	case "endpoint":
		return cty.StringVal(name + ".db.sandbox.internal:5432")
	case "url":
		return cty.StringVal("https://" + name + ".bucket.sandbox.internal")
	case "private_ip":
		// A host in 10.0.0.0/8, avoiding .0 and .255 in the last octet.
		n := binary.BigEndian.Uint32(sum[4:8])
		return cty.StringVal(fmt.Sprintf("10.%d.%d.%d", byte(n>>16), byte(n>>8), 1+byte(n)%254))
	}
	panic(fmt.Sprintf("mock: no simulated value for %s.%s", typeName, attr))
}
