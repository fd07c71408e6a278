// Package kubetargettest gives tests a Kubernetes target that trusts a Gantry workload
// issuer: the issuer's discovery document and keys served over https with a certificate of a
// CA made for the test (kube-apiserver fetches a JWT issuer's keys over https only), and a
// private control plane (kubecluster.StartControlPlane) whose API server trusts that issuer
// with kubetarget's authentication configuration, RBAC and admission policy applied.
package kubetargettest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"gantry/models/identity"
	"gantry/runner/kube/kubecluster"
	"gantry/runner/targets/kubetarget"
)

// IssuerPath is the path of the served issuer under its server, as a portal serves it.
const IssuerPath = "/workload"

// Served is an issuer served over https.
type Served struct {
	Issuer *identity.Issuer
	// URL is the issuer's URL (its tokens' iss); CAPEM the CA that signed the server's
	// certificate.
	URL   string
	CAPEM []byte
}

// ServeIssuer serves, until the test ends, the discovery document and keys of the issuer
// newIssuer makes for the URL it is given, over https on loopback.
func ServeIssuer(t testing.TB, newIssuer func(issuerURL string) *identity.Issuer) Served {
	t.Helper()
	caPEM, cert := NewTLS(t, "127.0.0.1")
	srv := httptest.NewUnstartedServer(nil)
	served := Served{URL: "https://" + srv.Listener.Addr().String() + IssuerPath, CAPEM: caPEM}
	served.Issuer = newIssuer(served.URL)
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+IssuerPath+"/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(served.Issuer.Discovery())
	})
	mux.HandleFunc("GET "+IssuerPath+"/jwks", func(w http.ResponseWriter, r *http.Request) {
		keys, err := served.Issuer.JWKS(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(keys)
	})
	srv.Config.Handler = mux
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return served
}

// NewTLS makes a CA (returned as PEM) and a server certificate it signed for hosts (IP
// addresses or DNS names), valid for a day.
func NewTLS(t testing.TB, hosts ...string) (caPEM []byte, cert tls.Certificate) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gantry test issuer CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Target starts a private control plane trusting trust, applies grant's manifests and waits
// until the admission policy is enforced; the control plane stops when the test ends.
func Target(ctx context.Context, t testing.TB, trust kubetarget.Trust, grant kubetarget.Grant) *kubecluster.ControlPlane {
	t.Helper()
	authn, err := kubetarget.AuthenticationConfig(trust)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := kubecluster.StartControlPlane(ctx, kubecluster.ControlPlaneOptions{AuthenticationConfig: authn, Log: t.Output()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	cfg, err := cp.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if err := kubetarget.Apply(ctx, cfg, grant); err != nil {
		t.Fatal(err)
	}
	return cp
}
