//go:build !nodev

package main

// devCommands are the development commands of the default build: `gantry dev` (a private
// PostgreSQL, the development OpenID Provider, the sandbox cloud and a mail catcher, all
// in this process) and `gantry dev-oidc`. The production image builds with -tags nodev
// (nodev.go), which leaves them out and with them every sandbox package: the binary that
// ships links no development cloud.
var devCommands = struct{ dev, oidc command }{dev: runDev, oidc: runDevOIDC}
