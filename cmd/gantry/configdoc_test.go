package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// docInvocations are the command lines whose flags docs/configuration.md lists, in its
// order: every command of `commands`, subcommands spelled out.
var docInvocations = [][]string{
	{"serve"}, {"dev"}, {"dev-oidc"}, {"migrate"}, {"org", "invite"}, {"keys", "rotate"}, {"keys", "list"},
	{"audit", "verify"}, {"audit", "export"}, {"request"}, {"runs"}, {"review"}, {"approve"}, {"reject"},
}

// envOnly are the variables read without a flag; TestConfigurationDoc checks that the
// code reads each.
var envOnly = []struct{ name, file, meaning string }{
	{"GANTRY_LOG_LEVEL", "main.go", "`debug`, `info` (default), `warn` or `error`; logs are JSON on stderr"},
	{"GANTRY_SMTP_PASSWORD", "wire.go", "the SMTP password (PLAIN authentication): only from the environment, since a flag shows in the process list"},
	{"GANTRY_URL", "client.go", "the API commands (`request`, `runs`, `review`, `approve`, `reject`, `audit export`): the portal's address"},
	{"GANTRY_TOKEN", "client.go", "the API commands: an API token made on `/settings/tokens`, scoped for what the command does"},
}

// TestConfigurationDoc: docs/configuration.md is what the flag definitions say, generated
// from `gantry <command> --help` of every command (the same text people read there). With
// GANTRY_WRITE_DOCS=1 (`go tool task generate:docs`) it writes the file instead.
func TestConfigurationDoc(t *testing.T) {
	// Defaults come from the environment (envOr): a GANTRY_* variable set around the test
	// would leak into the document.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "GANTRY_") && name != "GANTRY_WRITE_DOCS" {
			t.Setenv(name, "")
		}
	}
	var invoked []string
	for _, inv := range docInvocations {
		invoked = append(invoked, inv[0])
	}
	for name := range commands {
		if !slices.Contains(invoked, name) {
			t.Errorf("gantry %s is not in docInvocations: docs/configuration.md would leave its flags out", name)
		}
	}
	for _, v := range envOnly {
		src, err := os.ReadFile(v.file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(src), `"`+v.name+`"`) {
			t.Errorf("%s is documented as read in %s, which does not name it", v.name, v.file)
		}
	}

	got, err := configurationDoc()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "configuration.md")
	if os.Getenv("GANTRY_WRITE_DOCS") == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/configuration.md is not what the flags say: run `go tool task generate:docs` and commit it (first difference at line %d)",
			firstDifference(got, want))
	}
}

// TestConfigurationDocCatchesAFlag: a flag added to a command shows in the generated
// document (so a stale file fails the test above), and the parser reads every part.
func TestConfigurationDocCatchesAFlag(t *testing.T) {
	usage := "Usage: gantry planted [flags]\n\nA planted command.\n\nFlags:\n" +
		"  -answer int\n    \tthe answer ($GANTRY_ANSWER) (default 42)\n" +
		"  -quiet\n    \tsay less, over two\n    \tlines\n"
	summary, rows := parseUsage(usage)
	if summary != "A planted command." || len(rows) != 2 {
		t.Fatalf("parsed %q, %+v", summary, rows)
	}
	if r := rows[0]; r.name != "answer" || r.env != "GANTRY_ANSWER" || r.def != "42" || r.meaning != "the answer" {
		t.Errorf("answer: %+v", r)
	}
	if r := rows[1]; r.name != "quiet" || r.env != "" || r.def != "" || r.meaning != "say less, over two lines" {
		t.Errorf("quiet: %+v", r)
	}
	doc, err := configurationDoc()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `--database-url` | `GANTRY_DATABASE_URL` |", "## gantry keys rotate", "`GANTRY_SMTP_PASSWORD`"} {
		if !bytes.Contains(doc, []byte(want)) {
			t.Errorf("the document lacks %q", want)
		}
	}
}

type flagRow struct{ name, env, def, meaning string }

var (
	envSuffix     = regexp.MustCompile(`\s*\(\$([A-Z0-9_]+)\)$`)
	defaultSuffix = regexp.MustCompile(`\s*\(default (.*)\)$`)
)

// parseUsage reads what newFlags' Usage prints: the summary, then flag.PrintDefaults.
func parseUsage(out string) (string, []flagRow) {
	head, defaults, _ := strings.Cut(out, "\nFlags:\n")
	paras := strings.SplitN(head, "\n\n", 2)
	summary := ""
	if len(paras) == 2 {
		summary = strings.Join(strings.Fields(paras[1]), " ")
	}
	var rows []flagRow
	for line := range strings.SplitSeq(defaults, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "  -"), " ")
			rows = append(rows, flagRow{name: name})
		case strings.HasPrefix(line, "    \t") && len(rows) > 0:
			r := &rows[len(rows)-1]
			r.meaning = strings.TrimSpace(r.meaning + " " + strings.TrimSpace(line))
		}
	}
	for i := range rows {
		r := &rows[i]
		if m := defaultSuffix.FindStringSubmatch(r.meaning); m != nil {
			r.def = strings.Trim(m[1], `"`)
			r.meaning = strings.TrimSuffix(r.meaning, m[0])
		}
		if m := envSuffix.FindStringSubmatch(r.meaning); m != nil {
			r.env = m[1]
			r.meaning = strings.TrimSuffix(r.meaning, m[0])
		}
	}
	return summary, rows
}

// configurationDoc is docs/configuration.md: each command's flags as its --help says them.
func configurationDoc() ([]byte, error) {
	host, _ := os.Hostname()
	var b bytes.Buffer
	b.WriteString("# Configuration\n\n" +
		"<!-- Generated from the flag definitions in cmd/gantry by `go tool task generate:docs`;\n" +
		"     TestConfigurationDoc fails when it differs. Edit the flags' help, not this file. -->\n\n" +
		"Every flag can also be set by the environment variable beside it (the flag wins). `gantry help\n" +
		"<command>` prints the same. Durations are Go durations (`90s`, `15m`, `2h`).\n")
	for _, inv := range docInvocations {
		var out, errOut bytes.Buffer
		if code := run(append(slices.Clone(inv), "--help"), &out, &errOut); code != 0 {
			return nil, fmt.Errorf("gantry %s --help exited %d: %s", strings.Join(inv, " "), code, errOut.String())
		}
		summary, rows := parseUsage(out.String())
		fmt.Fprintf(&b, "\n## gantry %s\n\n%s\n\n", strings.Join(inv, " "), summary)
		if len(rows) == 0 {
			b.WriteString("No flags.\n")
			continue
		}
		b.WriteString("| Flag | Variable | Default | Meaning |\n|---|---|---|---|\n")
		for _, r := range rows {
			env, def := "—", "—"
			if r.env != "" {
				env = "`" + r.env + "`"
			}
			switch {
			case r.def == host && r.name == "replica-id":
				def = "the host name"
			case r.def != "":
				def = "`" + r.def + "`"
			}
			fmt.Fprintf(&b, "| `--%s` | %s | %s | %s |\n", r.name, env, def, strings.ReplaceAll(r.meaning, "|", `\|`))
		}
	}
	b.WriteString("\n## Environment only\n\n| Variable | Meaning |\n|---|---|\n")
	for _, v := range envOnly {
		fmt.Fprintf(&b, "| `%s` | %s |\n", v.name, v.meaning)
	}
	return b.Bytes(), nil
}

func firstDifference(a, b []byte) int {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}
