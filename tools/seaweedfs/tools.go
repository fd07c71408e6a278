//go:build tools

// Package tools pins the SeaweedFS server. Nothing imports this package; it only keeps
// github.com/seaweedfs/seaweedfs/weed (and everything it needs) in go.mod and go.sum so that
// `go build -mod=readonly` can build it reproducibly.
package tools

import _ "github.com/seaweedfs/seaweedfs/weed"
