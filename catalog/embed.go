// Package catalog embeds the template catalog shipped with Gantry: templates/<name>/
// holds each template's manifest (template.yaml), its OpenTofu module (module/) and
// its provider lock file. models/catalog loads, checks and pins them.
package catalog

import "embed"

// FS holds the shipped templates (and allowlist.yaml when there is one).
//
//go:embed all:templates
var FS embed.FS
