//go:build tools

// Package tools pins the OpenTofu CLI. Nothing imports this package; it only keeps
// github.com/opentofu/opentofu/cmd/tofu (and everything it needs) in go.mod and go.sum so that
// `go build -mod=readonly` can build it reproducibly.
package tools

import _ "github.com/opentofu/opentofu/cmd/tofu"
