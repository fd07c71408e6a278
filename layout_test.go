// Package gantry_test holds repository-wide checks. TestDependencyDirection keeps the
// folder roles of CONVENTIONS.md true: cmd -> web -> handlers -> views, models;
// models never reach up; views do no I/O; handlers never touch the database.
package gantry_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []pkg
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// forbidden lists, per package prefix, the imports it must not use: a package and its
// subpackages, or with a trailing "!" that package alone. Test files are not checked
// (go list's Imports holds only non-test imports).
var forbidden = map[string][]string{
	"gantry/models":    {"gantry/web", "gantry/handlers", "gantry/views", "gantry/cmd", "github.com/labstack/echo", "github.com/a-h/templ"},
	"gantry/views":     {"gantry/models", "gantry/handlers", "gantry/cmd", "gorm.io", "github.com/labstack/echo", "net/http\x00"},
	"gantry/handlers":  {"gorm.io", "gantry/models/db", "gantry/web\x00", "gantry/cmd", "github.com/riverqueue"},
	"gantry/web/paths": {"gantry/"},
	"gantry/policies":  {"gantry/"},
	"gantry/runner":    {"gantry/web", "gantry/handlers", "gantry/views"},
}

func TestDependencyDirection(t *testing.T) {
	for _, p := range listPackages(t) {
		for prefix, bans := range forbidden {
			if p.ImportPath != prefix && !strings.HasPrefix(p.ImportPath, prefix+"/") {
				continue
			}
			for _, imp := range p.Imports {
				for _, ban := range bans {
					if banned(imp, ban) {
						t.Errorf("%s imports %s: not allowed for %s", p.ImportPath, imp, prefix)
					}
				}
			}
		}
	}
}

func banned(imp, ban string) bool {
	if exact, ok := strings.CutSuffix(ban, "!"); ok {
		return imp == exact
	}
	ban = strings.TrimSuffix(ban, "/")
	return imp == ban || strings.HasPrefix(imp, ban+"/")
}
