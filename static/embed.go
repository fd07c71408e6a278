// Package static holds the embedded stylesheet and the vendored front-end libraries.
// Vendored files carry their version in the name and come from their npm packages
// (`go tool task vendor` refreshes them); nothing is loaded from a CDN.
package static

import "embed"

// FS is served under /static/.
//
//go:embed css vendor img
var FS embed.FS

// Vendored file names, referenced by the layout.
const (
	HTMX    = "vendor/htmx-2.0.11.min.js"
	HTMXSSE = "vendor/htmx-ext-sse-2.2.4.min.js"
	CSS     = "css/gantry.css"
	Favicon = "img/favicon.svg"
)
