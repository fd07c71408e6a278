// Package static holds the embedded stylesheet and the vendored front-end libraries.
// Vendored files carry their version in the name and come from their npm packages
// (`go tool task vendor` refreshes them); nothing is loaded from a CDN. Pages link to
// each file by a content-hashed name (Hashed), so browsers may cache it for good.
package static

import "embed"

// FS is served under /static/, as Embedded loads it (assets.go).
//
//go:embed css vendor img js
var FS embed.FS

// File names, referenced by the layout through Hashed.
const (
	HTMX    = "vendor/htmx-2.0.11.min.js"
	HTMXSSE = "vendor/htmx-ext-sse-2.2.4.min.js"
	CSS     = "css/gantry.css"
	Favicon = "img/favicon.svg"
	// FormsJS is Gantry's own script: error summaries that focus their fields, and
	// aria-invalid kept in step by inline validation.
	FormsJS = "js/forms.js"
	// NavJS closes the navigation's open menus on Escape or a click elsewhere.
	NavJS = "js/nav.js"
	// CopyJS shows the Copy buttons beside output values and copies them.
	CopyJS = "js/copy.js"
)
