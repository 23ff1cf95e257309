// Package testenv owns starting real external programs for integration
// tests: redis-server (standalone, with password, ACL user or TLS, and as a
// cluster), Postfix with its own configuration and queue directories,
// Dovecot (LMTP, IMAP, Sieve and imapsieve) with its own users and
// maildirs, Sendmail (unpacked by scripts/install-test-deps.sh) with its own
// m4-built sendmail.cf and queue, a minimal IMAP client, and a small
// loopback SMTP/LMTP sink that records what an MTA delivers; and, for
// every package's tests, Golden, a golden file read (or rewritten by
// -update).
//
// Every helper takes a testing.TB, runs its program on free loopback ports
// inside t.TempDir(), and stops it in t.Cleanup. Nothing here uses system
// services, /etc/postfix configuration or /var/spool/postfix.
//
// A missing program fails the test when the environment variable CI is
// "true" and skips it with a loud message otherwise; run
// scripts/install-test-deps.sh to install everything the helpers need.
//
// Helpers that take a testing.TB call t.Fatal on failure, so they must be
// called from the test goroutine. Methods that return an error do not touch
// the test and are safe from any goroutine.
//
// It may import lab/corpus (the shared corpora's directory) and no other
// bulkmilter package: tests and the lab import it, the daemon never
// (cmd/milterd's TestDaemonLinksNoLabOrTestCode).
package testenv
