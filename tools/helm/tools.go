//go:build tools

// Package tools pins the Helm CLI. Nothing imports this package; it only keeps
// helm.sh/helm/v4/cmd/helm (and everything it needs) in go.mod and go.sum so that
// `go build -mod=readonly` can build it reproducibly.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
