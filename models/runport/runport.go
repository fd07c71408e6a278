// Package runport is the vocabulary the run lifecycle (models/run) shares with the
// aggregates it stands on: what it needs to know of a member (models/org), of a state
// version (models/state) and of a validated template request (models/catalog), and the
// calls those aggregates make back into runs in their own transactions (MemberWatcher,
// StateWatcher). It is a leaf: a foundation implements what runs need with these types
// without importing models/run, so the drawing reads the right way up — runs above,
// foundations below. The interfaces runs consume (run.Members, run.StateVersions,
// run.Catalog) stay in models/run, where they are used.
package runport
