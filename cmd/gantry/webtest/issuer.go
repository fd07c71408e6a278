package webtest

import (
	"context"
	"testing"

	"gantry/web"
)

// issuerURL is the workload issuer's URL when it is not the portal's ("": it is).
func issuerURL(opts Options) string {
	if opts.IssuerTLS == nil {
		return ""
	}
	return opts.IssuerTLS.URL
}

// serveIssuerTLS serves the portal's workload issuer paths on opts.IssuerTLS, when set,
// until the test ends.
func serveIssuerTLS(ctx context.Context, t testing.TB, opts Options, srv *web.Server) {
	if opts.IssuerTLS == nil {
		return
	}
	opts.IssuerTLS.Serve(srv.Echo)
	t.Cleanup(func() { _ = opts.IssuerTLS.Close(context.WithoutCancel(ctx)) })
}
