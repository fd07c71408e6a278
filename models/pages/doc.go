// Package pages builds one read model per page of the portal: everything a page shows,
// read in one call, in the domain's words. A handler binds the request, makes that one
// call, maps the answer to its view's props and renders; the JSON API of the same
// resource answers from the same read model. Each page is a small type over the roles
// and services it reads (named fields, built by the composition root), so what a page
// may read shows in its type.
//
// The pages stand above the aggregates they read (runs, workspaces, audit, the
// timeline): nothing below imports them.
package pages
