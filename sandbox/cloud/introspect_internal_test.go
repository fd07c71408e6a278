package cloud

import (
	"fmt"
	"testing"
)

// TestIntrospectionEndpointStaysWithTheIssuer: the cloud sends bearer tokens to the
// endpoint, so only one on the issuer's own origin is taken.
func TestIntrospectionEndpointStaysWithTheIssuer(t *testing.T) {
	t.Parallel()
	issuer := "http://127.0.0.1:8080/workload"
	for endpoint, ok := range map[string]bool{
		"": true,
		"http://127.0.0.1:8080/workload/introspect":  true,
		"https://127.0.0.1:8080/workload/introspect": false, // another scheme is another origin
		"http://127.0.0.1:9090/workload/introspect":  false,
		"http://evil.example/introspect":             false,
		"/workload/introspect":                       false,
		"ftp://127.0.0.1:8080/introspect":            false,
	} {
		got, err := introspectionEndpoint(issuer, endpoint)
		if (err == nil) != ok || (ok && got != endpoint) {
			t.Errorf("%q: got %q, %v; want accepted %v", endpoint, got, err, ok)
		}
	}
}

// TestEndedTokensAreBounded: the jtis remembered as ended stay under maxEnded, the
// oldest forgotten first.
func TestEndedTokensAreBounded(t *testing.T) {
	t.Parallel()
	var e endedTokens
	for n := range maxEnded + 10 {
		e.add(fmt.Sprint("jti-", n))
	}
	e.add("jti-20") // already there: no second entry
	if len(e.set) != maxEnded || len(e.order) != maxEnded {
		t.Fatalf("remembering %d (%d in order), want %d", len(e.set), len(e.order), maxEnded)
	}
	if e.has("jti-0") || e.has("jti-9") || !e.has("jti-10") || !e.has(fmt.Sprint("jti-", maxEnded+9)) {
		t.Fatal("the oldest were not the ones forgotten")
	}
}
