package store_test

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
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/store"
)

// testPKI writes a CA, a server certificate for 127.0.0.1 and
// redis.test, and a client certificate, as PEM files in dir.
type testPKI struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
}

func newTestPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bulkmilter test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP, dns []string) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: ips, DNSNames: dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kb, _ := x509.MarshalECPrivateKey(key)
		cf, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
		os.WriteFile(cf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
		os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
		return cf, kf
	}
	p := testPKI{CA: filepath.Join(dir, "ca.crt")}
	os.WriteFile(p.CA, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600)
	p.ServerCert, p.ServerKey = leaf("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")}, []string{"redis.test"})
	p.ClientCert, p.ClientKey = leaf("client", 3, x509.ExtKeyUsageClientAuth, nil, nil)
	return p
}

func TestRedisTLS(t *testing.T) {
	pki := newTestPKI(t, t.TempDir())
	probe := &tls.Config{InsecureSkipVerify: true}
	clientCert, err := tls.LoadX509KeyPair(pki.ClientCert, pki.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	probe.Certificates = []tls.Certificate{clientCert}
	r := startRedisTLS(t, probe, "--tls-cert-file", pki.ServerCert, "--tls-key-file", pki.ServerKey,
		"--tls-ca-cert-file", pki.CA, "--tls-auth-clients", "yes")
	ctx := context.Background()
	tests := []struct {
		name string
		tls  *store.TLSOptions
		ok   bool
	}{
		{"CA file and client certificate", &store.TLSOptions{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey}, true},
		{"server name checked", &store.TLSOptions{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey, ServerName: "redis.test"}, true},
		{"wrong server name", &store.TLSOptions{CAFile: pki.CA, CertFile: pki.ClientCert, KeyFile: pki.ClientKey, ServerName: "other.test"}, false},
		{"verification is on by default", &store.TLSOptions{CertFile: pki.ClientCert, KeyFile: pki.ClientKey}, false},
		{"skip verify when asked", &store.TLSOptions{CertFile: pki.ClientCert, KeyFile: pki.ClientKey, InsecureSkipVerify: true}, true},
		{"client certificate required", &store.TLSOptions{CAFile: pki.CA}, false},
		{"no TLS", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := store.NewRedis(ctx, store.RedisOptions{Addrs: []string{r.Addr}, TLS: tc.tls, Timeout: 500 * time.Millisecond, MaxRetries: -1})
			if err != nil {
				if tc.ok {
					t.Fatalf("NewRedis: %v", err)
				}
				t.Logf("refused at start: %v", err)
				return
			}
			defer s.Close()
			err = s.Ping(ctx)
			if tc.ok && err != nil {
				t.Fatalf("ping: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("ping succeeded; want a TLS failure")
			}
			if !tc.ok {
				t.Logf("ping: %v (unavailable: %v)", err, errors.Is(err, store.ErrUnavailable))
			}
		})
	}
	// The URL form.
	s, err := store.NewRedisURL(ctx, "rediss://"+r.Addr+"?tls_ca_file="+pki.CA+"&tls_cert_file="+pki.ClientCert+"&tls_key_file="+pki.ClientKey, store.Params{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping through rediss:// URL: %v", err)
	}
	if _, err := store.NewRedis(ctx, store.RedisOptions{Addrs: []string{r.Addr}, TLS: &store.TLSOptions{CAFile: "/nonexistent"}}); err == nil {
		t.Error("missing CA file: no error")
	}
}
