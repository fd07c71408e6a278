// Package classifytest generates the large plan the plan-review benchmarks share: one
// 10,000-change `tofu show -json` document with replaces, dependents and destroys.
package classifytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Groups is the number of resource Groups in Plan10k.
const Groups = 2500 // each: a network and its subnet, database and dns record

// Plan10k writes a plan of 4 changes per group. Networks of Groups ≡ 0 (mod
// 10) are replaced (their subnets update), databases of Groups ≡ 5 (mod 10)
// are replaced, dns records of Groups ≡ 3 (mod 10) are destroyed; the rest
// are no-ops. subnet -> network; database -> subnet, network; record ->
// database (in config), and the prior state repeats it.
func Plan10k() []byte {
	var b strings.Builder
	b.WriteString(`{"format_version":"1.2","terraform_version":"1.10.10","planned_values":{"root_module":{}},"resource_changes":[`)
	rc := func(first bool, typ, name string, actions, reason, paths string) {
		if !first {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"address":"%s.%s","mode":"managed","type":"%s","name":"%s","provider_name":"portal.local/sandbox/sandbox",`+
			`"change":{"actions":%s,"before":{"id":"%s-id","cidr":"10.0.0.0/16","tags":{"owner":"team-a","env":"prod","cost_center":"1234"},"settings":[{"tier":"small","size":20}]},`+
			`"after":{"id":"%s-id","cidr":"10.0.0.0/16","tags":{"owner":"team-a","env":"prod","cost_center":"1234"},"settings":[{"tier":"small","size":20}]},`+
			`"after_unknown":{},"before_sensitive":{"tags":{},"settings":[{}]},"after_sensitive":{"tags":{},"settings":[{}]}%s}%s}`,
			typ, name, typ, name, actions, name, name, paths, reason)
	}
	noop := `["no-op"]`
	repl := `["delete","create"]`
	for i := 0; i < Groups; i++ {
		n, s, d, r := fmt.Sprint("n", i), fmt.Sprint("s", i), fmt.Sprint("d", i), fmt.Sprint("r", i)
		switch {
		case i%10 == 0:
			rc(i == 0, "sandbox_network", n, repl, `,"action_reason":"replace_because_cannot_update"`, `,"replace_paths":[["cidr"]]`)
			rc(false, "sandbox_subnet", s, `["update"]`, "", "")
		default:
			rc(i == 0, "sandbox_network", n, noop, "", "")
			rc(false, "sandbox_subnet", s, noop, "", "")
		}
		if i%10 == 5 {
			rc(false, "sandbox_database", d, repl, `,"action_reason":"replace_because_cannot_update"`, `,"replace_paths":[["settings",0,"tier"]]`)
		} else {
			rc(false, "sandbox_database", d, noop, "", "")
		}
		if i%10 == 3 {
			rc(false, "sandbox_dns_record", r, `["delete"]`, `,"action_reason":"delete_because_no_resource_config"`, "")
		} else {
			rc(false, "sandbox_dns_record", r, noop, "", "")
		}
	}
	b.WriteString(`],"prior_state":{"format_version":"1.0","terraform_version":"1.10.10","values":{"root_module":{"resources":[`)
	st := func(first bool, typ, name string, deps ...string) {
		if !first {
			b.WriteByte(',')
		}
		dj, _ := json.Marshal(deps)
		fmt.Fprintf(&b, `{"address":"%s.%s","mode":"managed","type":"%s","name":"%s","provider_name":"portal.local/sandbox/sandbox","schema_version":0,"values":{"id":"%s-id"},"sensitive_values":{},"depends_on":%s}`,
			typ, name, typ, name, name, dj)
	}
	for i := 0; i < Groups; i++ {
		st(i == 0, "sandbox_network", fmt.Sprint("n", i))
		st(false, "sandbox_subnet", fmt.Sprint("s", i), fmt.Sprint("sandbox_network.n", i))
		st(false, "sandbox_database", fmt.Sprint("d", i), fmt.Sprint("sandbox_network.n", i), fmt.Sprint("sandbox_subnet.s", i))
		st(false, "sandbox_dns_record", fmt.Sprint("r", i), fmt.Sprint("sandbox_database.d", i))
	}
	b.WriteString(`]}}},"configuration":{"root_module":{"resources":[`)
	cf := func(first bool, typ, name string, refs ...string) {
		if !first {
			b.WriteByte(',')
		}
		var ex []string
		for k, ref := range refs {
			ex = append(ex, fmt.Sprintf(`"ref%d":{"references":["%s.id","%s"]}`, k, ref, ref))
		}
		ex = append(ex, `"cidr":{"constant_value":"10.0.0.0/16"}`)
		fmt.Fprintf(&b, `{"address":"%s.%s","mode":"managed","type":"%s","name":"%s","provider_config_key":"sandbox","expressions":{%s},"schema_version":0}`,
			typ, name, typ, name, strings.Join(ex, ","))
	}
	for i := 0; i < Groups; i++ {
		cf(i == 0, "sandbox_network", fmt.Sprint("n", i))
		cf(false, "sandbox_subnet", fmt.Sprint("s", i), fmt.Sprint("sandbox_network.n", i))
		cf(false, "sandbox_database", fmt.Sprint("d", i), fmt.Sprint("sandbox_subnet.s", i), fmt.Sprint("sandbox_network.n", i))
		if i%10 != 3 {
			cf(false, "sandbox_dns_record", fmt.Sprint("r", i), fmt.Sprint("sandbox_database.d", i))
		}
	}
	b.WriteString(`]}},"timestamp":"2026-11-29T12:00:00Z","errored":false}`)
	return []byte(b.String())
}

// Plan10kFile writes Plan10k to a file and reads it back, so benchmarks decode bytes
// as a portal reads them (not a string the builder still shares).
func Plan10kFile(tb testing.TB) []byte {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "plan10k.json")
	if err := os.WriteFile(path, Plan10k(), 0o600); err != nil {
		tb.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// PlainDecode is what every plan-review benchmark is compared with, in the same run
// (bench.Ratio): plain encoding/json decoding of data (the 10,000-change plan file)
// into map[string]any.
func PlainDecode(tb testing.TB, data []byte) func() {
	return func() {
		var m map[string]any
		if err := json.Unmarshal(data, &m); err != nil {
			tb.Fatal(err)
		}
	}
}
