package testenv

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// DKIMKey is an RSA key pair for DKIM tests: the private key as OpenDKIM
// reads it and the TXT record a verifier looks up.
type DKIMKey struct {
	Domain, Selector string
	PrivatePEM       []byte
	// TXT is the key record ("v=DKIM1; k=rsa; p=…") published at
	// Selector._domainkey.Domain.
	TXT string
}

// NewDKIMKey generates a 1024-bit key (OpenDKIM's minimum; fast to make on
// a busy machine) for domain and selector.
func NewDKIMKey(t testing.TB, domain, selector string) DKIMKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatalf("testenv: dkim key: %v", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatalf("testenv: dkim key: %v", err)
	}
	return DKIMKey{
		Domain: domain, Selector: selector,
		PrivatePEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}),
		TXT:        "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(pub),
	}
}

// OpenDKIMOptions configures StartOpenDKIM.
type OpenDKIMOptions struct {
	// Sign makes a signer (Mode s) with this key for its domain; the zero
	// value makes a verifier (Mode v).
	Sign *DKIMKey
	// SignHeaders lists the header fields a signer covers (SignHeaders);
	// empty means OpenDKIM's default list.
	SignHeaders []string
	// AuthservID is the authserv-id of the verifier's
	// Authentication-Results fields (AuthservID).
	AuthservID string
	// Keys are the public keys a verifier finds instead of DNS
	// (TestDNSData): no resolver is asked.
	Keys []DKIMKey
	// KeepForged keeps incoming Authentication-Results with the
	// verifier's own name, which OpenDKIM removes by default
	// (RemoveARFrom), so that a test sees what the milter after it does
	// with them.
	KeepForged bool
	// SenderHeaders, for a signer, are the fields OpenDKIM reads the
	// signing domain from (its SenderHeaders), in place of From: "Sender"
	// signs a message whose From is another domain, as a spammer signs
	// his own domain under a forged From.
	SenderHeaders []string
}

// OpenDKIM is a real opendkim milter on a loopback port.
type OpenDKIM struct {
	addr string
	proc *process
	dir  string
}

// StartOpenDKIM starts opendkim in the foreground with its own
// configuration under t.TempDir(), waits until its milter port accepts
// connections, and stops it in t.Cleanup.
func StartOpenDKIM(t testing.TB, opts OpenDKIMOptions) *OpenDKIM {
	t.Helper()
	bin := Program(t, "opendkim")
	d := &OpenDKIM{dir: t.TempDir()}
	conf := []string{
		"Syslog no",
		"Background no",
		"Canonicalization relaxed/relaxed",
		"On-Default accept",
		"On-BadSignature accept",
		"On-NoSignature accept",
		"On-KeyNotFound accept",
		"On-DNSError accept",
	}
	if os.Geteuid() == 0 {
		conf = append(conf, "UserID root")
	}
	if opts.Sign != nil {
		k := opts.Sign
		conf = append(conf, "Mode s", "Domain "+k.Domain, "Selector "+k.Selector,
			"KeyFile "+d.file(t, "key.pem", string(k.PrivatePEM)), "RequireSafeKeys false",
			"InternalHosts 0.0.0.0/0")
		if len(opts.SignHeaders) > 0 {
			conf = append(conf, "SignHeaders "+strings.Join(opts.SignHeaders, ","))
		}
		if len(opts.SenderHeaders) > 0 {
			conf = append(conf, "SenderHeaders "+strings.Join(opts.SenderHeaders, ","))
		}
	} else {
		var dns strings.Builder
		for _, k := range opts.Keys {
			fmt.Fprintf(&dns, "%s._domainkey.%s %s\n", k.Selector, k.Domain, k.TXT)
		}
		// Loopback clients are "internal" by default: their mail would be
		// taken for the site's own and not verified.
		conf = append(conf, "Mode v", "InternalHosts 192.0.2.254", "TestDNSData file:"+d.file(t, "dns", dns.String()))
		if opts.AuthservID != "" {
			conf = append(conf, "AuthservID "+opts.AuthservID)
		}
		if opts.KeepForged {
			conf = append(conf, "RemoveARFrom nothing.invalid")
		}
	}
	var lastErr error
	for range 3 {
		port, err := freePort(t)
		if err != nil {
			t.Fatalf("testenv: opendkim: %v", err)
		}
		d.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		cf := d.file(t, "opendkim.conf", strings.Join(append(conf, "Socket inet:"+strconv.Itoa(port)+"@127.0.0.1"), "\n")+"\n")
		if lastErr = d.start(bin, cf); lastErr == nil {
			t.Cleanup(func() { d.proc.stop(5 * time.Second) })
			return d
		}
	}
	t.Fatalf("testenv: start opendkim: %v", lastErr)
	return nil
}

func (d *OpenDKIM) file(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(d.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatalf("testenv: opendkim: %v", err)
	}
	return p
}

func (d *OpenDKIM) start(bin, conf string) error {
	log, err := os.Create(filepath.Join(d.dir, "opendkim.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(bin, "-f", "-x", conf)
	cmd.Stdout, cmd.Stderr = log, log
	if d.proc, err = startProcess(cmd); err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if d.proc.exited() {
			return fmt.Errorf("opendkim exited: %s", readTail(log.Name(), 4096))
		}
		if c, err := net.DialTimeout("tcp", d.addr, time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	d.proc.kill()
	return fmt.Errorf("opendkim did not listen on %s: %s", d.addr, readTail(log.Name(), 4096))
}

// Addr returns the milter's "127.0.0.1:port".
func (d *OpenDKIM) Addr() string { return d.addr }

// Log returns what opendkim wrote to stderr.
func (d *OpenDKIM) Log() string { return readTail(filepath.Join(d.dir, "opendkim.log"), 1<<20) }
