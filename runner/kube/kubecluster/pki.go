package kubecluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The cluster's PKI, made once per state directory with crypto/x509 and kept: a CA, the
// service-account key pair and one certificate per client or server. ECDSA P-256 everywhere
// (fast to make) except the service-account key, which the apiserver wants as RSA for RS256
// tokens.

// certSpec is one certificate the CA signs.
type certSpec struct {
	name   string // file stem under pki/
	cn     string
	orgs   []string
	server bool
	client bool
	dns    []string
	ips    []net.IP
}

// pkiSpecs lists the certificates of a cluster whose node has the name node and the address nodeIP.
func pkiSpecs(node string, nodeIP net.IP) []certSpec {
	loopback := net.ParseIP("127.0.0.1")
	return []certSpec{
		{name: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: []net.IP{loopback, net.ParseIP(serviceIP), nodeIP}},
		// The apiserver's identity towards kubelets (logs, exec).
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, client: true},
		{name: "admin", cn: "gantry-admin", orgs: []string{"system:masters"}, client: true},
		{name: "controller-manager", cn: "system:kube-controller-manager", client: true},
		{name: "scheduler", cn: "system:kube-scheduler", client: true},
		// The controller-manager's and scheduler's own HTTPS (health), signed by the CA so
		// that health checks verify them.
		{name: "loopback-serving", cn: "localhost", server: true, dns: []string{"localhost"}, ips: []net.IP{loopback}},
		// The kubelet: a client of the apiserver (Node authorizer) and the server it dials.
		{name: "kubelet", cn: "system:node:" + node, orgs: []string{"system:nodes"}, client: true, server: true,
			dns: []string{node, "localhost"}, ips: []net.IP{loopback, nodeIP}},
	}
}

// ensurePKI creates what is missing of the PKI under dir/pki. A certificate whose node
// address no longer matches (the machine's address changed) is made again.
func ensurePKI(dir, node string, nodeIP net.IP) error {
	pki := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	caCert, caKey, err := ensureCA(pki)
	if err != nil {
		return fmt.Errorf("making the cluster CA: %w", err)
	}
	if err := ensureServiceAccountKey(pki); err != nil {
		return fmt.Errorf("making the service-account key: %w", err)
	}
	for _, spec := range pkiSpecs(node, nodeIP) {
		if certCovers(filepath.Join(pki, spec.name+".crt"), caCert, spec.ips) {
			continue
		}
		if err := issue(pki, spec, caCert, caKey); err != nil {
			return fmt.Errorf("making the %s certificate: %w", spec.name, err)
		}
	}
	return nil
}

func ensureCA(pki string) (*x509.Certificate, crypto.Signer, error) {
	certFile, keyFile := filepath.Join(pki, "ca.crt"), filepath.Join(pki, "ca.key")
	if cert, key, err := loadPair(certFile, keyFile); err == nil {
		return cert, key, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "gantry-test-cluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, err
	}
	if err := writePair(certFile, keyFile, der, key); err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func ensureServiceAccountKey(pki string) error {
	keyFile, pubFile := filepath.Join(pki, "sa.key"), filepath.Join(pki, "sa.pub")
	if _, err := os.Stat(pubFile); err == nil {
		return nil
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(keyFile, "PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	return writePEM(pubFile, "PUBLIC KEY", pubDER, 0o644)
}

func issue(pki string, spec certSpec, caCert *x509.Certificate, caKey crypto.Signer) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: spec.cn, Organization: spec.orgs},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		DNSNames:     spec.dns,
		IPAddresses:  spec.ips,
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caKey)
	if err != nil {
		return err
	}
	return writePair(filepath.Join(pki, spec.name+".crt"), filepath.Join(pki, spec.name+".key"), der, key)
}

// certCovers reports whether the certificate in name exists, was signed by ca, is valid for
// another month and carries every address in ips.
func certCovers(name string, ca *x509.Certificate, ips []net.IP) bool {
	cert, err := loadCert(name)
	if err != nil || cert.CheckSignatureFrom(ca) != nil || time.Now().AddDate(0, 1, 0).After(cert.NotAfter) {
		return false
	}
	for _, want := range ips {
		found := false
		for _, have := range cert.IPAddresses {
			found = found || have.Equal(want)
		}
		if !found {
			return false
		}
	}
	return true
}

func loadCert(name string) (*x509.Certificate, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s: no certificate", name)
	}
	return x509.ParseCertificate(block.Bytes)
}

func loadPair(certFile, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	cert, err := loadCert(certFile)
	if err != nil {
		return nil, nil, err
	}
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, nil, fmt.Errorf("%s: no key", keyFile)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New(keyFile + ": not a signing key")
	}
	return cert, signer, nil
}

func writePair(certFile, keyFile string, der []byte, key crypto.Signer) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(keyFile, "PRIVATE KEY", keyDER, 0o600); err != nil {
		return err
	}
	return writePEM(certFile, "CERTIFICATE", der, 0o644)
}

func writePEM(name, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(name, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return n
}
