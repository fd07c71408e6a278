package web

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"strings"
	"time"
)

// IssuerTLS serves the workload issuer (its discovery document, keys and
// introspection: the paths under /workload/) over TLS, for a target that trusts only an
// https issuer (a Kubernetes API server's JWT authenticator) when the portal itself is
// served in plain http (development, tests, a private cluster). Its certificate is
// signed by a CA made when it starts, whose certificate (CAPEM) the target is given; the
// private keys live only in memory, so every start makes a new CA. In production, serve
// the portal over https with a certificate the targets trust instead (AWS wants a
// publicly trusted one) and leave this off: docs/targets.md.
type IssuerTLS struct {
	// URL is the issuer's URL: https://<address>/workload.
	URL string
	// CAPEM is the CA certificate that signed the listener's certificate, PEM.
	CAPEM []byte

	ln   net.Listener
	cert tls.Certificate
	srv  *http.Server
}

// IssuerPath is where the portal serves the workload issuer.
const IssuerPath = "/workload"

// issuerCertLife bounds the CA's and the certificate's life: a restart makes new ones.
const issuerCertLife = 365 * 24 * time.Hour

// ListenIssuerTLS listens on addr (host:port; port 0 picks one) and makes the CA and the
// listener's certificate for the address it got. Nothing is served until Serve.
func ListenIssuerTLS(addr string) (*IssuerTLS, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("workload issuer over TLS: %w", err)
	}
	host, port, err := net.SplitHostPort(ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, err
	}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" && net.ParseIP(h) == nil {
		host = h // a name the operator chose stays the name in the URL and certificate
	} else if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("workload issuer over TLS: %q names no host: give the address targets reach it at, such as 10.0.0.5:8443", addr)
	}
	caPEM, cert, err := issuerCertificates(host)
	if err != nil {
		ln.Close()
		return nil, err
	}
	return &IssuerTLS{URL: "https://" + net.JoinHostPort(host, port) + IssuerPath, CAPEM: caPEM, ln: ln, cert: cert}, nil
}

// Serve serves h's workload issuer paths (and nothing else: every other path is a 404)
// over TLS until Close.
func (s *IssuerTLS) Serve(h http.Handler) {
	only := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, IssuerPath+"/") {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
	s.srv = &http.Server{Handler: only, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{s.cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = s.srv.ServeTLS(s.ln, "", "") }()
}

// Close stops serving (or listening, before Serve).
func (s *IssuerTLS) Close(ctx context.Context) error {
	if s.srv == nil {
		return s.ln.Close()
	}
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// issuerCertificates makes a CA and a certificate for host signed by it.
func issuerCertificates(host string) (caPEM []byte, cert tls.Certificate, err error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		return n
	}
	ca := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "Gantry workload issuer CA"},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(issuerCertLife), IsCA: true, BasicConstraintsValid: true,
		MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return nil, tls.Certificate{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	leaf := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: host},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(issuerCertLife),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(host); ip != nil {
		leaf.IPAddresses = []net.IP{ip}
	} else {
		leaf.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, key.Public(), caKey)
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
