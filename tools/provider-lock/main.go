// Command provider-lock rebuilds the providers Gantry publishes and writes their lock
// entries into every catalog template's .terraform.lock.hcl (go tool task provider:lock):
// each template gets an entry for every provider its module requires, the sandbox and S3
// providers and the third-party ones Gantry builds (the Kubernetes provider: minutes the first time,
// then from its cache); an entry for a provider only the operator's mirror serves is kept.
// A changed lock file changes a template's module digest: publish those templates as new
// versions.
//
//	go run ./tools/provider-lock                                 # every catalog template
//	go run ./tools/provider-lock -print SOURCE,... [-mirror DIR] # print the lock file for these providers
//
// -print writes no template: it builds the named providers (full addresses, as
// registry.opentofu.org/hashicorp/kubernetes) and prints the lock file pinning them, for a
// template being written (go tool task provider:kubernetes). -mirror also publishes the
// third-party ones into DIR as a filesystem mirror that is a network mirror too (the
// protocol's JSON files beside the zips): the operator's --provider-mirror for production,
// serving exactly the packages the lock entries pin (docs/provider-mirror.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gantry/runner/tofu"
)

func main() {
	only := flag.String("print", "", "comma-separated provider addresses: print their lock file instead of writing the templates'")
	mirror := flag.String("mirror", "", "with -print: also publish the third-party providers into this directory (a filesystem and network mirror)")
	flag.Parse()
	if *mirror != "" && *only == "" {
		fmt.Fprintln(os.Stderr, "provider-lock: -mirror needs -print (the providers to publish)")
		os.Exit(2)
	}
	if err := run(context.Background(), *only, *mirror); err != nil {
		fmt.Fprintln(os.Stderr, "provider-lock:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, only, mirror string) error {
	templates, err := filepath.Glob(filepath.Join("catalog", "templates", "*"))
	if err != nil {
		return err
	}
	var sources []string
	if only != "" {
		sources = strings.Split(only, ",")
	} else {
		for _, t := range templates {
			required, err := tofu.RequiredSources(t)
			if err != nil {
				return err
			}
			sources = append(sources, required...)
		}
	}
	dir, err := os.MkdirTemp("", "provider-lock-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	tc, _, err := tofu.Build{Root: ".", Dir: dir, Providers: tofu.ThirdPartiesFor(sources), Log: os.Stderr}.Run(ctx)
	if err != nil {
		return err
	}
	if only != "" {
		var locks []tofu.Lock
		for _, source := range sources {
			l, ok := tc.LockOf(source)
			if !ok {
				return fmt.Errorf("Gantry does not build %s (it builds %s)", source, strings.Join(built(), ", "))
			}
			locks = append(locks, l)
		}
		if mirror != "" {
			if err := publish(ctx, mirror, tofu.ThirdPartiesFor(sources)); err != nil {
				return err
			}
		}
		_, err := os.Stdout.Write(tofu.LockFile(locks...))
		return err
	}
	for _, t := range templates {
		path := filepath.Join(t, ".terraform.lock.hcl")
		old, _ := os.ReadFile(path)
		lock, err := tofu.TemplateLockFile(t, old, tc.Locks)
		if err != nil {
			return fmt.Errorf("%s: %w", t, err)
		}
		if string(old) == string(lock) {
			continue
		}
		if err := os.WriteFile(path, lock, 0o644); err != nil {
			return err
		}
		fmt.Printf("updated %s: bump the template's version\n", path)
	}
	for _, l := range tc.Locks {
		fmt.Printf("%s %s: %v\n", l.Source, l.Version, l.Hashes)
	}
	return nil
}

// built are the addresses of the providers Gantry builds.
func built() []string {
	out := []string{tofu.ProviderSource, tofu.S3ProviderSource}
	for _, p := range tofu.ThirdParties {
		out = append(out, p.Source)
	}
	return out
}

// publish puts the providers' packages (from their cache: built already) into dir, with the
// network mirror protocol's index files.
func publish(ctx context.Context, dir string, providers []tofu.ThirdParty) error {
	for _, p := range providers {
		path, err := p.Ensure(ctx, ".", nil, os.Stderr)
		if err != nil {
			return err
		}
		l, err := tofu.BuildMirror(path, dir, p.Source, p.Version, tofu.ProviderPlatform)
		if err != nil {
			return err
		}
		if err := tofu.WriteMirrorIndex(dir, l, tofu.ProviderPlatform); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "published %s %s into %s\n", p.Source, p.Version, dir)
	}
	return nil
}
