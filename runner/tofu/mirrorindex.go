package tofu

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// WriteMirrorIndex adds l's package (which BuildMirror put in mirrorDir for platform) to the
// JSON files of the provider network mirror protocol, as `tofu providers mirror` writes them:
//
//	<mirrorDir>/<hostname>/<namespace>/<type>/index.json      {"versions": {"<version>": {}}}
//	<mirrorDir>/<hostname>/<namespace>/<type>/<version>.json  {"archives": {"<platform>": {"url": "<zip>", "hashes": [...]}}}
//
// so that the same directory serves as a filesystem mirror (which ignores the JSON files) and,
// behind any static https server, as a network mirror. Versions and platforms already listed
// are kept.
func WriteMirrorIndex(mirrorDir string, l Lock, platform string) error {
	dir := filepath.Join(mirrorDir, filepath.FromSlash(l.Source))
	typ := l.Source[strings.LastIndex(l.Source, "/")+1:]
	zip := fmt.Sprintf("terraform-provider-%s_%s_%s.zip", typ, l.Version, platform)
	if _, err := os.Stat(filepath.Join(dir, zip)); err != nil {
		return fmt.Errorf("indexing the mirror: %w", err)
	}
	var index struct {
		Versions map[string]struct{} `json:"versions"`
	}
	if err := readJSON(filepath.Join(dir, "index.json"), &index); err != nil {
		return err
	}
	if index.Versions == nil {
		index.Versions = map[string]struct{}{}
	}
	index.Versions[l.Version] = struct{}{}
	type archive struct {
		URL    string   `json:"url"`
		Hashes []string `json:"hashes,omitempty"`
	}
	var version struct {
		Archives map[string]archive `json:"archives"`
	}
	if err := readJSON(filepath.Join(dir, l.Version+".json"), &version); err != nil {
		return err
	}
	if version.Archives == nil {
		version.Archives = map[string]archive{}
	}
	version.Archives[platform] = archive{URL: zip, Hashes: l.Hashes}
	if err := writeJSON(filepath.Join(dir, "index.json"), index); err != nil {
		return err
	}
	return writeJSON(filepath.Join(dir, l.Version+".json"), version)
}

func readJSON(name string, v any) error {
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("reading %s: %w", name, err)
	}
	return nil
}

func writeJSON(name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(name, append(data, '\n'), 0o644)
}
