// Package catalog embeds the template catalog shipped with Gantry: templates/<name>/
// holds each template's manifest (template.yaml), its OpenTofu module (module/) and
// its provider lock file; allowlist.yaml pins the registry modules templates may call,
// and modules/ holds the archives of those that ship vendored (modules/<name>/ is the
// source of each, not embedded). models/catalog loads, checks and pins them.
package catalog

import "embed"

// FS holds the shipped templates, allowlist.yaml and the vendored module archives.
//
//go:embed all:templates allowlist.yaml modules/*.tar.gz
var FS embed.FS
