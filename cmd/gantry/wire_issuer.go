package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"gantry/web"
)

// issuerFlags say where targets find Gantry's workload identity issuer
// (docs/targets.md): by default at the portal's base URL + /workload; a Kubernetes API
// server trusts only an https issuer, so a portal served in plain http (development, a
// private cluster) can serve the issuer alone over TLS with a CA it makes.
type issuerFlags struct {
	url    string // --workload-issuer-url
	tls    string // --workload-tls
	caFile string // --workload-tls-ca
	// listening is the TLS listener open() opened (nil: none).
	listening *web.IssuerTLS
}

func (i *issuerFlags) register(f flags) {
	f.str(&i.url, "workload-issuer-url", "GANTRY_WORKLOAD_ISSUER_URL", "", "the workload identity issuer's URL as targets reach it (the iss of every token; default: the base URL + /workload). AWS wants an https URL with a publicly trusted certificate (docs/targets.md)")
	f.str(&i.tls, "workload-tls", "GANTRY_WORKLOAD_TLS", "", "host:port to serve the workload issuer alone over TLS at, with a certificate from a CA made at start, for a target that trusts only https issuers (a Kubernetes API server) while the portal is plain http; the issuer URL becomes https://host:port/workload")
	f.str(&i.caFile, "workload-tls-ca", "GANTRY_WORKLOAD_TLS_CA", "", "with --workload-tls: the file the CA certificate (PEM, public) is written to, for the targets' trust configuration")
}

// check refuses conflicting or malformed settings before anything starts.
func (i *issuerFlags) check() error {
	if i == nil {
		return nil
	}
	if i.tls != "" && i.url != "" {
		return fmt.Errorf("--workload-tls sets the issuer URL itself: drop --workload-issuer-url")
	}
	if i.caFile != "" && i.tls == "" {
		return fmt.Errorf("--workload-tls-ca needs --workload-tls")
	}
	if i.url != "" {
		u, err := url.Parse(i.url)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fmt.Errorf("--workload-issuer-url %q is not an http(s) URL without credentials or query", i.url)
		}
	}
	return nil
}

// open starts listening for the issuer over TLS when asked, writing the CA's
// certificate to --workload-tls-ca.
func (i *issuerFlags) open(logger *slog.Logger) error {
	if i == nil || i.tls == "" {
		return nil
	}
	l, err := web.ListenIssuerTLS(i.tls)
	if err != nil {
		return fmt.Errorf("--workload-tls: %w", err)
	}
	if i.caFile != "" {
		if err := os.WriteFile(i.caFile, l.CAPEM, 0o644); err != nil {
			l.Close(context.Background())
			return fmt.Errorf("--workload-tls-ca: %w", err)
		}
	}
	i.listening = l
	logger.Info("workload issuer served over TLS", "issuer", l.URL, "ca_file", i.caFile)
	return nil
}

// issuerURL is the issuer's URL when the flags set it ("": the base URL's).
func (i *issuerFlags) issuerURL() string {
	switch {
	case i == nil:
		return ""
	case i.listening != nil:
		return i.listening.URL
	case i.url != "":
		return i.url
	}
	return ""
}

// serve serves the portal's issuer paths on the TLS listener until ctx ends.
func (i *issuerFlags) serve(ctx context.Context, srv *web.Server) error {
	if i == nil || i.listening == nil {
		return nil
	}
	i.listening.Serve(srv.Echo)
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return i.listening.Close(stop)
}

// forCloud is the issuer URL and context the embedded sandbox cloud trusts it with: the
// TLS listener's, with a client trusting its CA, when there is one.
func (i *issuerFlags) forCloud(ctx context.Context, baseURL string) (context.Context, string) {
	if i == nil || i.listening == nil {
		return ctx, cmp.Or(i.issuerURL(), baseURL+"/workload")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(i.listening.CAPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return oidc.ClientContext(ctx, client), i.listening.URL
}
