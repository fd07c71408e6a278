package cloud_test

import (
	"errors"
	"strings"
	"testing"

	"gantry/sandbox/api"
	"gantry/sandbox/client"
	"gantry/sandbox/sandboxtest"
)

// TestIntrospectedTokensEndWithTheirGrant: with an issuer that offers introspection (as
// Gantry's does), the cloud asks at every workload call, after the signature checks, and
// caches no "active": the call after the issuer withdraws a token is a 401 saying the
// grant ended, for reads and changes alike, and from then on that token is refused
// without asking again. An issuer that does not answer fails the call closed (503, which
// clients retry); a static API key is never asked about.
func TestIntrospectedTokensEndWithTheirGrant(t *testing.T) {
	t.Parallel()
	iss := sandboxtest.NewIssuer(t)
	iss.OfferIntrospection()
	c := sandboxtest.NewCloud(t, iss)
	tok := iss.Token(t, "acme", "prod", "ws-a", "write")
	w := newClient(t, c.URL, tok)

	net := must(w.Create(ctx(), "network", map[string]any{"name": "n", "cidr": "10.9.0.0/16"}))(t)
	must(w.List(ctx(), "network"))(t)
	asked := iss.Introspections()
	if asked != 2 {
		t.Fatalf("the issuer was asked %d times for two calls, want 2", asked)
	}
	must(w.Get(ctx(), "network", net.ID))(t)
	if got := iss.Introspections(); got != asked+1 {
		t.Fatalf("an active answer was reused: %d questions after three calls", got)
	}

	// Withdrawn: the very next call, a read or a change, is refused.
	iss.Revoke(tok)
	_, err := w.List(ctx(), "network")
	wantStatus(t, err, 401, api.CodeUnauthenticated)
	var ce *client.Error
	if !errors.As(err, &ce) || !strings.Contains(ce.Message, "the token's grant has ended (window closed, phase over or run cancelled)") {
		t.Fatalf("refusal says %v", err)
	}
	if strings.Contains(ce.Message, tok) {
		t.Fatal("the refusal quotes the token")
	}
	asked = iss.Introspections()
	_, err = w.Update(ctx(), "network", net.ID, map[string]any{"name": "n2", "cidr": "10.9.0.0/16"})
	wantStatus(t, err, 401, api.CodeUnauthenticated)
	if got := iss.Introspections(); got != asked {
		t.Fatalf("an ended token was asked about again (%d questions, want %d): a grant never comes back", got, asked)
	}

	// Another live token still works; with the issuer down it fails closed.
	other := newClient(t, c.URL, iss.Token(t, "acme", "prod", "ws-a", "read"))
	must(other.List(ctx(), "network"))(t)
	iss.SetDown(true)
	_, err = other.List(ctx(), "network")
	wantStatus(t, err, 503, api.CodeIssuerUnavailable)

	// A static key is the cloud's own: the issuer is not asked, down or up.
	asked = iss.Introspections()
	key := must(keysOf(t, c.URL, c.AdminToken).create("acme", "prod", "read", "legacy pipeline"))(t)
	must(newClient(t, c.URL, key.Secret).List(ctx(), "network"))(t)
	if got := iss.Introspections(); got != asked {
		t.Fatalf("a static key was introspected (%d questions, want %d)", got, asked)
	}
}

// TestTokensWithoutIntrospectionAreNotAsked: an issuer that offers no introspection is
// trusted on signature and exp alone, as before.
func TestTokensWithoutIntrospectionAreNotAsked(t *testing.T) {
	t.Parallel()
	iss := sandboxtest.NewIssuer(t)
	c := sandboxtest.NewCloud(t, iss)
	tok := iss.Token(t, "acme", "prod", "ws-a", "write")
	iss.Revoke(tok) // nobody asks
	must(newClient(t, c.URL, tok).Create(ctx(), "bucket", map[string]any{"name": "b"}))(t)
	if got := iss.Introspections(); got != 0 {
		t.Fatalf("asked %d times", got)
	}
}
