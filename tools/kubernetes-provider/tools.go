//go:build tools

// Package tools pins terraform-provider-kubernetes. Nothing imports this package; it only keeps
// github.com/hashicorp/terraform-provider-kubernetes (and everything it needs) in go.mod and
// go.sum so that `go build -mod=readonly` can build it reproducibly.
package tools

import _ "github.com/hashicorp/terraform-provider-kubernetes"
