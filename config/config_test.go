package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

func TestEmptyFileGivesDefaults(t *testing.T) {
	// The default data_dir depends on the machine (/var/lib/bulkmilter
	// when it exists: deploy's package test creates it for a while); the
	// environment variable systemd sets fixes it.
	t.Setenv("STATE_DIRECTORY", "/state")
	c, err := Parse([]byte("# nothing\n"), "empty.yml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.file = "empty.yml"
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("got %+v, want %+v", *c, want)
	}
}

// The example config is the reference admins copy: it must parse, hold
// exactly the defaults, and mention every key of the schema.
func TestExampleConfig(t *testing.T) {
	const path = "../deploy/bulkmilter.yml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse(data, path)
	if err != nil {
		t.Fatalf("example config: %v", err)
	}
	want := Default()
	want.file = path
	want.DataDir = "/var/lib/bulkmilter"
	// Compare as YAML: an empty list in the file and a nil default are the same.
	if got, exp := mustMarshal(t, c), mustMarshal(t, &want); got != exp {
		t.Errorf("example config differs from the defaults:\n got %s\nwant %s", got, exp)
	}

	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	documented := indexLines(&root)
	for _, key := range schemaKeys(reflect.TypeOf(Config{}), "") {
		if _, ok := documented[key]; !ok {
			t.Errorf("key %s is missing from %s", key, path)
		}
	}
}

func mustMarshal(t *testing.T, c *Config) string {
	t.Helper()
	b, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// schemaKeys lists the dotted paths of every key in the schema.
func schemaKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		p := tag
		if prefix != "" {
			p = prefix + "." + tag
		}
		keys = append(keys, p)
		if f.Type.Kind() == reflect.Struct && f.Type.NumField() > 0 && f.Type.PkgPath() == t.PkgPath() {
			keys = append(keys, schemaKeys(f.Type, p)...)
		}
	}
	return keys
}

func TestParseValues(t *testing.T) {
	c, err := Parse([]byte(`
listen: unix:/run/bulkmilter/milter.sock
store:
  window: 7d
  redis:
    url: redis://127.0.0.1:6379/2
limits:
  max_message_bytes: 512KiB
policy:
  threshold: 25
  thresholds: {sift: 40}
`), "t.yml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.Store.Window.D(), 7*24*time.Hour; got != want {
		t.Errorf("window = %v, want %v", got, want)
	}
	if got, want := c.Limits.MaxMessageBytes, Size(512<<10); got != want {
		t.Errorf("max_message_bytes = %d, want %d", got, want)
	}
	if !c.UsesRedis() {
		t.Error("UsesRedis() = false with a redis url")
	}
	if got := c.ThresholdFor("sift"); got != 40 {
		t.Errorf("ThresholdFor(sift) = %d, want 40", got)
	}
	if got := c.ThresholdFor("imatch"); got != 25 {
		t.Errorf("ThresholdFor(imatch) = %d, want 25", got)
	}
	// Unset keys keep their defaults.
	if got, want := c.Store.MaxEntries, Default().Store.MaxEntries; got != want {
		t.Errorf("max_entries = %d, want default %d", got, want)
	}
}

// Broken configurations and the exact messages an admin sees.
func TestBrokenConfigs(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "listn: inet:127.0.0.1:1\n", []string{
			`b.yml:1: unknown key "listn" (did you mean "listen"? valid keys here: actions, data_dir, feedback, limits, listen, log, metrics_listen, policy, refile, secret_key_file, shutdown_timeout, signatures, socket, store)`,
		}},
		{"unknown nested key", "store:\n  windw: 1h\n", []string{
			`b.yml:2: store: unknown key "windw" (did you mean "window"? valid keys here: file, max_entries, redis, window)`,
		}},
		{"bad duration", "store:\n  window: soon\n", []string{
			`b.yml:2: store.window: expected a duration, got "soon" (write a duration such as "500ms", "30s", "24h" or "7d")`,
		}},
		{"bad size", "limits:\n  max_text_bytes: 1 lots\n", []string{
			`b.yml:2: limits.max_text_bytes: expected a size, got "1 lots" (write a size such as 65536, "512KiB" or "4MiB")`,
		}},
		{"wrong type", "policy:\n  threshold: many\n", []string{
			`b.yml:2: policy.threshold: expected a whole number, got "many" (write digits without quotes or units; the default is threshold: 10)`,
		}},
		{"unquoted brackets", "actions:\n  subject_tag: [BULK]   # tag\n", []string{
			`b.yml:2: actions.subject_tag: expected text, got a list (unquoted, [ starts a list: quote the text, e.g. subject_tag: "[BULK]")`,
		}},
		{"redis url scheme", "store:\n  redis:\n    url: http://localhost:6379\n", []string{
			`b.yml:3: store.redis.url: invalid Redis URL: unknown scheme "http" (use redis://HOST:PORT/DB, or rediss:// (TLS), unix:///path/redis.sock, redis+sentinel://, redis+cluster:// as docs/operations.md#redis describes)`,
		}},
		{"a section given a value", "store:\n  redis: redis://127.0.0.1:6379\n", []string{
			`b.yml:2: store.redis: expected a section of keys, got "redis://127.0.0.1:6379" (redis is a section: write the URL on the next line, indented, as url: redis://127.0.0.1:6379)`,
		}},
		{"a key in the wrong section", "threshold: 20\n", []string{
			`b.yml:1: unknown key "threshold" (threshold is a key of another section: policy.threshold; valid keys here: actions, data_dir, feedback, limits, listen, log, metrics_listen, policy, refile, secret_key_file, shutdown_timeout, signatures, socket, store)`,
		}},
		{"not a mapping", "- listen\n", []string{
			`b.yml:1: expected a section of keys, got a list (write the configuration as key: value lines; top-level keys: actions, data_dir, feedback, limits, listen, log, metrics_listen, policy, refile, secret_key_file, shutdown_timeout, signatures, socket, store)`,
		}},
		{"a list given a value", "actions:\n  except_domains: example.com\n", []string{
			`b.yml:2: actions.except_domains: expected a list, got "example.com" (write a list, e.g. except_domains: [example.com], or one "- item" per line below)`,
		}},
		{"every syntax error, then the rest", "log:\n\tlevel: info\nactions:\n  header: X: Bulk\npolicy:\n  threshold: 0\n", []string{
			`b.yml:2: log.level: a tab in the indentation (indent with spaces only; YAML does not allow tabs there)`,
			`b.yml:4: actions.header: a second ": " on the line (quote a value that contains ": ", e.g. key: "a: b"; or check this line's indentation)`,
			`b.yml:6: policy.threshold: must be positive, got 0 (use a number greater than 0)`,
		}},
		{"attach family out of range", "signatures:\n  attach:\n    min_bytes: -1\n    max_keys: 99\n", []string{
			`b.yml:2: signatures.attach: attach min bytes -1 must not be negative (see docs/signatures.md for each parameter's range)`,
			`b.yml:2: signatures.attach: attach max keys 99 must be within [1, 16] (see docs/signatures.md for each parameter's range)`,
		}},
		{"a type error does not hide later problems", "store:\n  window: soon\npolicy:\n  threshold: 0\n", []string{
			`b.yml:2: store.window: expected a duration, got "soon" (write a duration such as "500ms", "30s", "24h" or "7d")`,
			`b.yml:4: policy.threshold: must be positive, got 0 (use a number greater than 0)`,
		}},
		// The hints of a listen value an admin half-wrote: each names the form to write.
		{"relative unix socket", "listen: unix:milter.sock\n", []string{
			`b.yml:1: listen: unix socket path "milter.sock" must be absolute (write unix:/run/bulkmilter/milter.sock, or a path inside the Postfix chroot: docs/operations.md "The milter socket")`,
		}},
		{"listen without a type", "listen: 127.0.0.1:7357\n", []string{
			`b.yml:1: listen: invalid socket "127.0.0.1:7357": unknown type "127.0.0.1" (write inet:127.0.0.1:7357)`,
		}},
		{"listen a bare path", "listen: /run/bulkmilter/milter.sock\n", []string{
			`b.yml:1: listen: invalid socket "/run/bulkmilter/milter.sock" (write unix:/run/bulkmilter/milter.sock)`,
		}},
		{"every semantic problem at once", `
listen: tcp-ish
log:
  level: loud
policy:
  threshold: 0
  thresholds: {bogus: 3}
  on_store_error: panic
actions:
  header: "X Bulk"
feedback:
  trusted_networks: [10.0.0.0/33]
  login_domain: "@example.com"
`, []string{
			`b.yml:2: listen: invalid socket "tcp-ish" (use "inet:HOST:PORT" or "unix:/path/to/socket")`,
			`b.yml:4: log.level: invalid value "loud" (use one of: debug, info, warn, error)`,
			`b.yml:6: policy.threshold: must be positive, got 0 (use a number greater than 0)`,
			`b.yml:7: policy.thresholds.bogus: unknown signature family "bogus" (use one of: imatch, shingle, charshingle, sift, terms, contain, attach, lines)`,
			`b.yml:8: policy.on_store_error: invalid value "panic" (use one of: accept, tempfail)`,
			`b.yml:10: actions.header: invalid header name "X Bulk" (use a header field name such as X-Bulk)`,
			`b.yml:12: feedback.trusted_networks[0]: invalid network "10.0.0.0/33" (use an address or CIDR such as 192.0.2.0/24)`,
			`b.yml:13: feedback.login_domain: invalid domain "@example.com" (use a domain such as example.com)`,
		}},
		{"routing exceptions", `
actions:
  except_domains: [example.com, "", "a..b"]
  except_recipients: [boss@example.com, nobody]
  header_only_domains: [.lists.example, "x y"]
  header_only_recipients: ["@example.com"]
`, []string{
			`b.yml:3: actions.except_domains[1]: invalid domain "" (use a domain such as example.com, or .example.com for its subdomains)`,
			`b.yml:3: actions.except_domains[2]: invalid domain "a..b" (use a domain such as example.com, or .example.com for its subdomains)`,
			`b.yml:4: actions.except_recipients[1]: invalid address "nobody" (use an address such as user@example.com)`,
			`b.yml:5: actions.header_only_domains[1]: invalid domain "x y" (use a domain such as example.com, or .example.com for its subdomains)`,
			`b.yml:6: actions.header_only_recipients[0]: invalid address "@example.com" (use an address such as user@example.com)`,
		}},
		{"refiling", `
refile:
  enabled: true
  folder: INBOX
  domains: ["a b"]
  doveadm:
    url: ftp://dovecot
  retries: -1
  backoff: 0s
`, []string{
			`b.yml:4: refile.folder: invalid folder "INBOX" (use a mailbox name such as Bulk)`,
			`b.yml:5: refile.domains[0]: invalid domain "a b" (use a domain such as example.com, or .example.com for its subdomains)`,
			`b.yml:6: refile.doveadm.password_file: the doveadm HTTP API needs one credential (name the file holding doveadm_password, or api_key_file for doveadm_api_key (one of them))`,
			`b.yml:7: refile.doveadm.url: invalid URL "ftp://dovecot" (use the doveadm HTTP API, e.g. http://127.0.0.1:8080/doveadm/v1)`,
			`b.yml:8: refile.retries: must not be negative, got -1 (use 0 or more)`,
			`b.yml:9: refile.backoff: must be positive (use a duration such as "10s")`,
		}},
		{"refiling hook", "refile:\n  enabled: true\n  mover: hook\n", []string{
			`b.yml:3: refile.mover: the hook needs a command or a URL (set refile.hook.command (program and arguments) or refile.hook.url, not both)`,
		}},
		{"syntax error", "listen: [\n", []string{
			`b.yml:1: listen: a value that is not complete (close any [ or { on the same line, or quote the value if the brackets are text)`,
		}},
		{"authserv-id with a blank", "policy:\n  authserv_id: mx example.com\n", []string{
			`b.yml:2: policy.authserv_id: invalid authserv-id "mx example.com" (use the host name your DKIM verifier writes first in Authentication-Results, e.g. mx.example.com)`,
		}},
		{"relay not a network", "policy:\n  relays: [192.0.2.0/24, mx.example.com]\n", []string{
			`b.yml:2: policy.relays[1]: invalid network "mx.example.com" (use an address or CIDR such as 192.0.2.0/24)`,
		}},
		{"level header named like the verdict header", "actions:\n  level_header: x-bulk\n", []string{
			`b.yml:2: actions.level_header: same as the verdict header (use a different name than actions.header)`,
		}},
		{"two documents", "listen: inet:127.0.0.1:1\n---\nlisten: inet:127.0.0.1:2\n", []string{
			`b.yml:2: more than one YAML document (remove the --- line and what follows it)`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "b.yml")
			if err == nil {
				t.Fatal("Parse succeeded, want errors")
			}
			got := strings.Split(err.Error(), "\n")
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// A file with ten different mistakes, one of each kind an admin makes
// (a syntax error, an unknown key, values of the wrong type, invalid
// values, a URL scheme, a repeated key), is reported in one run: ten
// lines, each with file, line, key path and a hint.
func TestTenMistakes(t *testing.T) {
	const path = "testdata/ten-mistakes.yml"
	_, err := Load(path)
	if err == nil {
		t.Fatal("Load succeeded, want problems")
	}
	var probs Problems
	if !errors.As(err, &probs) {
		t.Fatalf("Load returned %T, want Problems: %v", err, err)
	}
	got := err.Error() + "\n"
	golden := "testdata/ten-mistakes.golden"
	want := testenv.Golden(t, golden, []byte(got), *update)
	if got != string(want) {
		t.Errorf("problems differ from %s (go test ./config -update):\n got:\n%s\nwant:\n%s", golden, got, want)
	}
	if len(probs) != 10 {
		t.Errorf("%d problems, want 10", len(probs))
	}
	lines := map[int]bool{}
	for _, p := range probs {
		if p.File != path || p.Line == 0 || p.Hint == "" {
			t.Errorf("problem without file, line or hint: %+v", p)
		}
		if strings.Contains(p.Msg, "!!") || strings.Contains(p.Msg, "unmarshal") {
			t.Errorf("raw YAML-library text: %q", p.Msg)
		}
		lines[p.Line] = true
	}
	if len(lines) != 10 {
		t.Errorf("problems on %d distinct lines, want 10", len(lines))
	}
}

// Load checks that the files a configuration names can be read, with the
// key's line.
func TestLoadChecksFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yml")
	missing := filepath.Join(dir, "nope.lex")
	cfg := "signatures:\n  lexicon: " + missing + "\nstore:\n  redis:\n    url: redis://127.0.0.1:6379\n    password_file: " + filepath.Join(dir, "pw") + "\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	want := []string{
		path + ":2: signatures.lexicon: no such file " + missing + " (check the path; relative paths start from the daemon's working directory)",
		path + ":6: store.redis.password_file: no such file " + filepath.Join(dir, "pw") + " (check the path; relative paths start from the daemon's working directory)",
	}
	if err == nil || !reflect.DeepEqual(strings.Split(err.Error(), "\n"), want) {
		t.Errorf("Load: got %v, want %q", err, want)
	}
	if _, err := Parse([]byte(cfg), path); err != nil {
		t.Errorf("Parse reads no files, but failed: %v", err)
	}
}

func TestParseListen(t *testing.T) {
	for _, tc := range []struct{ in, network, addr string }{
		{"inet:127.0.0.1:7357", "tcp", "127.0.0.1:7357"},
		{"inet:[::1]:7357", "tcp", "[::1]:7357"},
		{"inet:7357@localhost", "tcp", "localhost:7357"},
		{"unix:/run/bulkmilter/milter.sock", "unix", "/run/bulkmilter/milter.sock"},
		{"local:/run/m.sock", "unix", "/run/m.sock"},
	} {
		n, a, err := ParseListen(tc.in)
		if err != nil || n != tc.network || a != tc.addr {
			t.Errorf("ParseListen(%q) = %q, %q, %v; want %q, %q", tc.in, n, a, err, tc.network, tc.addr)
		}
	}
	for _, bad := range []string{"", "inet:", "inet:host", "inet:host:99999", "unix:relative.sock", "ftp:x:1"} {
		if _, _, err := ParseListen(bad); err == nil {
			t.Errorf("ParseListen(%q) succeeded, want an error", bad)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("listen: inet:127.0.0.1:1\n"))
	f.Add([]byte("store:\n  window: 7d\n"))
	f.Add([]byte("policy: {thresholds: {sift: 3}}\n"))
	// Every key, and every kind of mistake: a run starts from the whole
	// schema instead of finding each section by chance.
	for _, path := range []string{"../deploy/bulkmilter.yml", "testdata/ten-mistakes.yml"} {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "f.yml")
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Parse accepted a config that Validate rejects: %v", verr)
			}
		}
	})
}
