// Package api is the sandbox cloud's contract, shared by the cloud (gantry/sandbox/cloud), its
// client (gantry/sandbox/client) and the OpenTofu provider (gantry/sandbox/provider): the resource
// kinds with their attributes and validation rules, and the JSON wire format.
//
// One table (Kinds) drives the cloud's server-side validation and the provider's schema, so the
// two cannot disagree. The attributes, their types, which ones are computed and which ones force
// replacement must also equal the MockTofuRunner's copy in runner/mock/schema.go; the provider's
// tests compare the two.
package api

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// Type is an attribute's value type. The Go value of each type, after Normalize, is noted.
type Type int

const (
	String     Type = iota // string
	Int                    // int64 (a whole number; tofu's "number")
	Bool                   // bool
	StringMap              // map[string]string
	StringList             // []string
)

func (t Type) String() string {
	switch t {
	case String:
		return "string"
	case Int:
		return "number"
	case Bool:
		return "bool"
	case StringMap:
		return "map of string"
	case StringList:
		return "list of string"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Check validates one non-null attribute value (of the attribute's Go type).
type Check struct {
	Rule string          // human-readable, e.g. "one of postgres, mysql"
	Fn   func(any) error // nil: no check
}

// Attr is one attribute of a resource kind. An attribute that is neither Required nor Computed is
// Optional: unset means null, and the cloud keeps it null (there are no server-side defaults, so a
// plan shows exactly what the configuration says, as the mock runner's plans do).
type Attr struct {
	Name        string
	Type        Type
	Required    bool
	Computed    bool // set by the cloud only; never configurable
	ForceNew    bool // a change cannot be made in place: the object is replaced
	Description string
	Check       Check
}

// Kind is one resource kind. Its API name is the resource type without the "sandbox_" prefix.
type Kind struct {
	Name        string // "database"
	IDPrefix    string // "db": ids look like db-1a2b3c4d
	OrgScoped   bool   // lives in the organization's namespace, not a workspace's
	DataBearing bool   // holds data that a replacement or deletion loses
	Description string
	Attrs       []Attr
	// CheckObject validates combinations of attributes. vals holds only the known, non-null
	// values (a provider validating configuration may not know every value yet).
	CheckObject func(vals map[string]any) []FieldError
}

// TypeName is the OpenTofu resource type: "sandbox_database".
func (k Kind) TypeName() string { return "sandbox_" + k.Name }

// Attr returns the named attribute.
func (k Kind) Attr(name string) (Attr, bool) {
	for _, a := range k.Attrs {
		if a.Name == name {
			return a, true
		}
	}
	return Attr{}, false
}

// Regions, Sizes and Engines are the values the sandbox cloud offers.
var (
	Regions = []string{"eu-west", "eu-central", "us-east"}
	Sizes   = []string{"small", "medium", "large"}
	// Engines maps each database engine to its supported major versions.
	Engines = map[string][]string{
		"postgres": {"13", "14", "15", "16", "17"},
		"mysql":    {"8.0", "8.4"},
	}
	// EnginePorts is the port in a database's endpoint.
	EnginePorts = map[string]int{"postgres": 5432, "mysql": 3306}
)

var kinds = []Kind{
	{
		Name: "network", IDPrefix: "net",
		Description: "A private IPv4 network.",
		Attrs: []Attr{
			idAttr("network"),
			{Name: "name", Type: String, Required: true, ForceNew: true, Description: "Name of the network.", Check: nameCheck},
			{Name: "cidr", Type: String, Required: true, Description: "Address range, an IPv4 network such as 10.20.0.0/16 (prefix /8 to /28). Can change in place while every subnet still fits.", Check: cidrCheck},
			{Name: "region", Type: String, ForceNew: true, Description: "Region: " + strings.Join(Regions, ", ") + ".", Check: oneOf(Regions...)},
			labelsAttr(),
		},
	},
	{
		Name: "subnet", IDPrefix: "subnet",
		Description: "A subnet of a sandbox_network; its range must lie inside the network's range.",
		Attrs: []Attr{
			idAttr("subnet"),
			{Name: "network_id", Type: String, Required: true, ForceNew: true, Description: "The network's id.", Check: refCheck("net")},
			{Name: "name", Type: String, Required: true, Description: "Name of the subnet.", Check: nameCheck},
			{Name: "cidr", Type: String, Required: true, ForceNew: true, Description: "Address range inside the network's range, such as 10.20.1.0/24.", Check: cidrCheck},
		},
	},
	{
		Name: "database", IDPrefix: "db", DataBearing: true,
		Description: "A managed database. It holds data: replacing or destroying it loses the data.",
		Attrs: []Attr{
			idAttr("database"),
			{Name: "endpoint", Type: String, Computed: true, Description: "Host and port clients connect to: <name>.db.sandbox.internal:<port>."},
			{Name: "name", Type: String, Required: true, ForceNew: true, Description: "Name of the database.", Check: nameCheck},
			{Name: "engine", Type: String, Required: true, ForceNew: true, Description: "Engine: postgres or mysql. Changing it replaces the database.", Check: oneOf("postgres", "mysql")},
			{Name: "engine_version", Type: String, Required: true, ForceNew: true, Description: "Engine major version (postgres 13-17, mysql 8.0 or 8.4). Changing it replaces the database.", Check: Check{Rule: "a version such as 16 or 8.0", Fn: matches(regexp.MustCompile(`^[0-9]{1,2}(\.[0-9]{1,2})?$`), "a version such as 16 or 8.0")}},
			{Name: "size", Type: String, Required: true, Description: "Instance size: " + strings.Join(Sizes, ", ") + ".", Check: oneOf(Sizes...)},
			{Name: "storage_gb", Type: Int, Required: true, Description: "Storage in GiB, 10 to 16384. It can grow in place but never shrink.", Check: intRange(10, 16384)},
			{Name: "backup_retention_days", Type: Int, Description: "Days of backups to keep, 0 to 35.", Check: intRange(0, 35)},
			{Name: "encrypted", Type: Bool, ForceNew: true, Description: "Encrypt storage at rest. Changing it replaces the database."},
			{Name: "network_id", Type: String, ForceNew: true, Description: "The network the database is attached to.", Check: refCheck("net")},
			{Name: "subnet_id", Type: String, ForceNew: true, Description: "The subnet the database is attached to.", Check: refCheck("subnet")},
			labelsAttr(),
		},
		CheckObject: func(vals map[string]any) []FieldError {
			engine, ok1 := vals["engine"].(string)
			version, ok2 := vals["engine_version"].(string)
			if !ok1 || !ok2 {
				return nil
			}
			if supported, ok := Engines[engine]; ok && !slices.Contains(supported, version) {
				return []FieldError{{Attr: "engine_version", Message: fmt.Sprintf("%s %s is not offered; choose one of %s", engine, version, strings.Join(supported, ", "))}}
			}
			return nil
		},
	},
	{
		Name: "bucket", IDPrefix: "bkt", DataBearing: true,
		Description: "An object storage bucket. It holds data: replacing or destroying it loses the objects.",
		Attrs: []Attr{
			idAttr("bucket"),
			{Name: "url", Type: String, Computed: true, Description: "The bucket's URL: https://<name>.bucket.sandbox.internal."},
			{Name: "name", Type: String, Required: true, ForceNew: true, Description: "Name of the bucket.", Check: nameCheck},
			{Name: "region", Type: String, ForceNew: true, Description: "Region: " + strings.Join(Regions, ", ") + ".", Check: oneOf(Regions...)},
			{Name: "versioning", Type: Bool, Description: "Keep every version of every object."},
			{Name: "retention_days", Type: Int, Description: "Days an object is kept before it may be deleted, 0 to 3650 (0: until deleted).", Check: intRange(0, 3650)},
			{Name: "public", Type: Bool, Description: "Allow anonymous reads."},
			labelsAttr(),
		},
	},
	{
		Name: "instance", IDPrefix: "i",
		Description: "A virtual machine in a subnet.",
		Attrs: []Attr{
			idAttr("instance"),
			{Name: "private_ip", Type: String, Computed: true, Description: "The instance's address, inside its subnet's range."},
			{Name: "name", Type: String, Required: true, Description: "Name of the instance.", Check: nameCheck},
			{Name: "size", Type: String, Required: true, Description: "Instance size: " + strings.Join(Sizes, ", ") + ".", Check: oneOf(Sizes...)},
			{Name: "image", Type: String, Required: true, ForceNew: true, Description: "Boot image, such as debian-12. Changing it replaces the instance.", Check: Check{Rule: "an image name such as debian-12", Fn: matches(regexp.MustCompile(`^[a-z0-9][a-z0-9._/:-]{0,127}$`), "an image name such as debian-12")}},
			{Name: "subnet_id", Type: String, Required: true, ForceNew: true, Description: "The subnet the instance runs in.", Check: refCheck("subnet")},
		},
	},
	{
		Name: "org_policy", IDPrefix: "pol", OrgScoped: true,
		Description: "An organization-wide policy. It lives in the organization, not in a workspace: every workspace of the organization can read it, and apply (write) identities of the organization can change it.",
		Attrs: []Attr{
			idAttr("policy"),
			{Name: "name", Type: String, Required: true, ForceNew: true, Description: "Name of the policy.", Check: nameCheck},
			{Name: "rules", Type: StringList, Required: true, Description: "The policy's rules, 1 to 100 non-empty strings.", Check: rulesCheck},
		},
	},
}

// Kinds lists the resource kinds in a fixed order.
func Kinds() []Kind { return slices.Clone(kinds) }

// Lookup finds a kind by its API name ("database").
func Lookup(name string) (Kind, bool) {
	for _, k := range kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

var idPattern = regexp.MustCompile(`^([a-z]+)-[0-9a-f]{8}$`)

// ValidID reports whether id is a well-formed id of kind k ("db-1a2b3c4d").
func (k Kind) ValidID(id string) bool {
	m := idPattern.FindStringSubmatch(id)
	return m != nil && m[1] == k.IDPrefix
}

func idAttr(what string) Attr {
	return Attr{Name: "id", Type: String, Computed: true, Description: "The " + what + "'s id, assigned by the cloud."}
}

func labelsAttr() Attr {
	return Attr{Name: "labels", Type: StringMap, Description: "Labels: up to 64 keys (lower-case letters, digits, _ . -; starting with a letter; at most 63 characters), values up to 255 characters.", Check: labelsCheck}
}

var (
	namePattern  = regexp.MustCompile(`^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$`)
	labelPattern = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,62}$`)
)

var nameCheck = Check{
	Rule: "1 to 63 lower-case letters, digits and hyphens, starting with a letter and not ending with a hyphen",
	Fn:   matches(namePattern, "1 to 63 lower-case letters, digits and hyphens, starting with a letter and not ending with a hyphen"),
}

var cidrCheck = Check{Rule: "an IPv4 network address with a prefix from /8 to /28, such as 10.20.0.0/16", Fn: func(v any) error {
	_, err := ParseCIDR(v.(string))
	return err
}}

// ParseCIDR parses an IPv4 network in the form the cloud accepts: a network address (host bits
// zero) with a prefix length from 8 to 28.
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%q is not an IPv4 network such as 10.20.0.0/16", s)
	}
	if p.Bits() < 8 || p.Bits() > 28 {
		return netip.Prefix{}, fmt.Errorf("%q: the prefix length must be from /8 to /28", s)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%q is not a network address (its host bits are set); did you mean %q?", s, m.String())
	}
	return p, nil
}

func refCheck(prefix string) Check {
	rule := "an id such as " + prefix + "-1a2b3c4d"
	return Check{Rule: rule, Fn: func(v any) error {
		m := idPattern.FindStringSubmatch(v.(string))
		if m == nil || m[1] != prefix {
			return fmt.Errorf("%q is not %s", v, rule)
		}
		return nil
	}}
}

func oneOf(values ...string) Check {
	rule := "one of " + strings.Join(values, ", ")
	return Check{Rule: rule, Fn: func(v any) error {
		if !slices.Contains(values, v.(string)) {
			return fmt.Errorf("%q is not %s", v, rule)
		}
		return nil
	}}
}

func matches(re *regexp.Regexp, rule string) func(any) error {
	return func(v any) error {
		if !re.MatchString(v.(string)) {
			return fmt.Errorf("%q is not %s", v, rule)
		}
		return nil
	}
}

func intRange(lo, hi int64) Check {
	rule := fmt.Sprintf("a whole number from %d to %d", lo, hi)
	return Check{Rule: rule, Fn: func(v any) error {
		if n := v.(int64); n < lo || n > hi {
			return fmt.Errorf("%d is not %s", n, rule)
		}
		return nil
	}}
}

var labelsCheck = Check{Rule: "up to 64 labels; keys of lower-case letters, digits, _ . - starting with a letter (at most 63 characters); values up to 255 characters", Fn: func(v any) error {
	m := v.(map[string]string)
	if len(m) > 64 {
		return fmt.Errorf("%d labels is more than 64", len(m))
	}
	for _, key := range sortedKeys(m) {
		if !labelPattern.MatchString(key) {
			return fmt.Errorf("label key %q must be lower-case letters, digits, _ . -, start with a letter and be at most 63 characters", key)
		}
		if len(m[key]) > 255 {
			return fmt.Errorf("label %q: the value is longer than 255 characters", key)
		}
	}
	return nil
}}

var rulesCheck = Check{Rule: "1 to 100 non-empty rules of at most 1024 characters", Fn: func(v any) error {
	rules := v.([]string)
	if len(rules) == 0 || len(rules) > 100 {
		return fmt.Errorf("%d rules: a policy has 1 to 100 rules", len(rules))
	}
	for i, r := range rules {
		if strings.TrimSpace(r) == "" {
			return fmt.Errorf("rule %d is empty", i)
		}
		if len(r) > 1024 {
			return fmt.Errorf("rule %d is longer than 1024 characters", i)
		}
	}
	return nil
}}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
