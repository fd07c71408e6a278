// Package modules fetches the archives of the registry and https modules the catalog's
// allowlist pins, once, and keeps them by their sha256. The portal fetches, never a
// runner: a runner has no network, and a module it fetched would be code nobody
// checked. An archive whose sha256 is not the allowlisted one is refused before
// anything keeps or uses it, and a kept archive is checked again at every read, so a
// store changed underneath is refused too. models/catalog puts the archives into the
// config bundles (catalog.Archives is what it asks of this package).
package modules

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"

	"gantry/models/bundle"
	"gantry/models/catalog"
)

// FetchTimeout bounds one module's fetch: the registry's discovery and download
// answers and the archive itself. A request waits for it (the first time only).
const FetchTimeout = time.Minute

// maxRedirects bounds the redirects one request may follow.
const maxRedirects = 5

// Archives fetches module archives and keeps them in PostgreSQL (store.go).
type Archives struct {
	db     *gorm.DB
	client *http.Client
}

// New returns the archives kept in gdb, fetched with client (nil: https with the
// system's certificate roots, $SSL_CERT_FILE and the environment's proxy). Whatever the
// client, only https is followed, and at most five redirects.
func New(gdb *gorm.DB, client *http.Client) *Archives {
	c := http.Client{Timeout: FetchTimeout}
	if client != nil {
		c = *client
	}
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("more than %d redirects", maxRedirects)
		}
		if req.URL.Scheme != "https" {
			return fmt.Errorf("a redirect to %s: only https is followed", redact(req.URL))
		}
		return nil
	}
	return &Archives{db: gdb, client: &c}
}

var _ catalog.Archives = (*Archives)(nil)

// Mismatch refuses an archive whose sha256 is not the allowlisted one.
type Mismatch struct {
	Module   string // the package and its version, "registry.example/acme/labels/sandbox 1.0.0"
	Location string // where it came from (without a query)
	Want     string // the allowlisted sha256
	Got      string // the fetched archive's
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("module %s: the archive fetched from %s has %s, not the allowlisted %s; it was refused and nothing was kept",
		m.Module, m.Location, m.Got, m.Want)
}

// Archive implements catalog.Archives: the kept archive when there is one (checked
// again), else the one fetched now, checked, then kept for every replica. Two
// replicas fetching at once both check theirs; the first insert wins, the second
// changes nothing (the same sha256 is the same bytes).
func (a *Archives) Archive(ctx context.Context, pkg, version, sum string) ([]byte, error) {
	module := pkg
	if version != "" {
		module += " " + version
	}
	data, ok, err := a.stored(ctx, module, sum)
	if err != nil || ok {
		return data, err
	}
	fetchCtx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	location, err := a.locate(fetchCtx, pkg, version)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", module, err)
	}
	if data, err = a.download(fetchCtx, location); err != nil {
		return nil, fmt.Errorf("module %s: %w", module, err)
	}
	// Nothing of an archive is used, unpacked or kept before this comparison.
	if got := bundle.Digest(data); got != sum {
		return nil, &Mismatch{Module: module, Location: redact(location), Want: sum, Got: got}
	}
	if err := a.keep(ctx, sum, pkg, version, redact(location), data); err != nil {
		return nil, err
	}
	return data, nil
}

// IsMismatch reports whether err refuses an archive for its sha256.
func IsMismatch(err error) bool {
	var m *Mismatch
	return errors.As(err, &m)
}
