package pgcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// errNoBinaries is what a machine without a PostgreSQL server gets; the
// instruction in it is the whole fix on Debian.
var errNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found in $PATH, " +
	"`pg_config --bindir` or /usr/lib/postgresql/*/bin: " +
	"install the Debian package `postgresql` (apt-get install postgresql)")

// findBinDir returns a directory holding both initdb and pg_ctl. Debian keeps
// them out of $PATH (in /usr/lib/postgresql/<major>/bin), so $PATH is only the
// first place to look.
func findBinDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil && hasServerBins(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); hasServerBins(dir) {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	var usable []string
	for _, m := range matches {
		if hasServerBins(m) {
			usable = append(usable, m)
		}
	}
	if dir := highestVersion(usable); dir != "" {
		return dir, nil
	}
	return "", errNoBinaries
}

func hasServerBins(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return false
		}
	}
	return true
}

// highestVersion picks, among /usr/lib/postgresql/<version>/bin paths, the one
// with the highest version, comparing numerically so that 10 beats 9.6.
func highestVersion(dirs []string) string {
	best, bestV := "", []int(nil)
	for _, d := range dirs {
		v := parseVersion(filepath.Base(filepath.Dir(d)))
		if v == nil {
			continue
		}
		if bestV == nil || versionLess(bestV, v) {
			best, bestV = d, v
		}
	}
	return best
}

func parseVersion(s string) []int {
	var v []int
	for _, part := range strings.Split(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil
		}
		v = append(v, n)
	}
	return v
}

func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}
