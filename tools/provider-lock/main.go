// Command provider-lock rebuilds the sandbox provider and writes its lock entry into
// every catalog template's .terraform.lock.hcl (go tool task provider:lock). A changed
// lock file changes a template's module digest: publish those templates as new versions.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"gantry/runner/tofu"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "provider-lock:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "provider-lock-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tc, err := tofu.PrepareToolchain(context.Background(), ".", dir, os.Stderr)
	if err != nil {
		return err
	}
	templates, err := filepath.Glob(filepath.Join("catalog", "templates", "*"))
	if err != nil {
		return err
	}
	for _, t := range templates {
		path := filepath.Join(t, ".terraform.lock.hcl")
		old, _ := os.ReadFile(path)
		if string(old) == string(tc.Lock.File()) {
			continue
		}
		if err := os.WriteFile(path, tc.Lock.File(), 0o644); err != nil {
			return err
		}
		fmt.Printf("updated %s: bump the template's version\n", path)
	}
	fmt.Printf("sandbox provider %s: %v\n", tofu.ProviderVersion, tc.Lock.Hashes)
	return nil
}
