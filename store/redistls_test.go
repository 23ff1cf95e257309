package store_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
)

func TestRedisTLS(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{TLS: true, TLSClientAuth: true})
	// The store takes files, as an admin's configuration would.
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, r.CACertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	cert := r.TLSConfig().Certificates[0]
	keyDER, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	crt, key := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client.key")
	os.WriteFile(crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)

	ctx := context.Background()
	tests := []struct {
		name string
		tls  *store.TLSOptions
		ok   bool
	}{
		{"CA file and client certificate", &store.TLSOptions{CAFile: ca, CertFile: crt, KeyFile: key}, true},
		{"server name checked", &store.TLSOptions{CAFile: ca, CertFile: crt, KeyFile: key, ServerName: "localhost"}, true},
		{"wrong server name", &store.TLSOptions{CAFile: ca, CertFile: crt, KeyFile: key, ServerName: "other.test"}, false},
		{"verification is on by default", &store.TLSOptions{CertFile: crt, KeyFile: key}, false},
		{"skip verify when asked", &store.TLSOptions{CertFile: crt, KeyFile: key, InsecureSkipVerify: true}, true},
		{"client certificate required", &store.TLSOptions{CAFile: ca}, false},
		{"no TLS", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// A minute: the refused cases fail on the handshake, not on the
			// clock, and an accepted one must not fail because a loaded
			// machine stalled it.
			s, err := store.NewRedis(ctx, store.RedisOptions{Addrs: []string{r.Addr()}, TLS: tc.tls, Timeout: time.Minute, MaxRetries: -1})
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
	s, err := store.NewRedisURL(ctx, "rediss://"+r.Addr()+"?timeout=1m&tls_ca_file="+ca+"&tls_cert_file="+crt+"&tls_key_file="+key, store.Params{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping through rediss:// URL: %v", err)
	}
	if _, err := store.NewRedis(ctx, store.RedisOptions{Addrs: []string{r.Addr()}, TLS: &store.TLSOptions{CAFile: "/nonexistent"}}); err == nil {
		t.Error("missing CA file: no error")
	}
}
