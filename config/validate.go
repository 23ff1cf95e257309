package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bulkmilter/bulkmilter/signature"
	"github.com/bulkmilter/bulkmilter/store"
)

// validator collects problems with their places in the file.
type validator struct {
	file  string
	lines lineIndex
	probs Problems
}

func (v *validator) add(path, hint, format string, args ...any) {
	v.probs = append(v.probs, &Problem{
		File: v.file, Line: v.lines.line(path), Path: path,
		Msg: fmt.Sprintf(format, args...), Hint: hint,
	})
}

func (v *validator) positive(path string, n int) {
	if n <= 0 {
		v.add(path, "use a number greater than 0", "must be positive, got %d", n)
	}
}

func (v *validator) oneOf(path, val string, allowed ...string) {
	for _, a := range allowed {
		if val == a {
			return
		}
	}
	v.add(path, "use one of: "+strings.Join(allowed, ", "), "invalid value %q", val)
}

func (v *validator) domains(path string, ds []string) {
	for i, d := range ds {
		if strings.Trim(d, ".") == "" || strings.ContainsAny(d, "@ \t") || strings.Contains(d, "..") {
			v.add(fmt.Sprintf("%s[%d]", path, i), `use a domain such as example.com, or .example.com for its subdomains`, "invalid domain %q", d)
		}
	}
}

func (v *validator) addresses(path string, as []string) {
	for i, a := range as {
		local, domain, ok := strings.Cut(a, "@")
		if !ok || local == "" || domain == "" || strings.ContainsAny(a, " \t<>") {
			v.add(fmt.Sprintf("%s[%d]", path, i), "use an address such as user@example.com", "invalid address %q", a)
		}
	}
}

func (c *Config) validate(lines lineIndex) Problems {
	v := &validator{file: c.file, lines: lines}

	if _, _, err := ParseListen(c.Listen); err != nil {
		hint := `use "inet:HOST:PORT" or "unix:/path/to/socket"`
		// unix: comes first: "unix:milter.sock" also splits as HOST:PORT.
		if strings.HasPrefix(c.Listen, "unix:") {
			hint = `write unix:/run/bulkmilter/milter.sock, or a path inside the Postfix chroot: docs/operations.md "The milter socket"`
		} else if _, _, herr := net.SplitHostPort(c.Listen); herr == nil {
			hint = "write inet:" + c.Listen
		} else if strings.HasPrefix(c.Listen, "/") {
			hint = "write unix:" + c.Listen
		}
		v.add("listen", hint, "%v", err)
	}
	if c.Socket.Mode != "" {
		if m, err := strconv.ParseUint(c.Socket.Mode, 8, 32); err != nil || m > 0o777 {
			v.add("socket.mode", `write an octal mode such as "0660"`, "invalid mode %q", c.Socket.Mode)
		}
	}
	if c.MetricsListen != "" {
		if _, _, err := net.SplitHostPort(c.MetricsListen); err != nil {
			v.add("metrics_listen", `use "HOST:PORT", e.g. "127.0.0.1:9357", or "" to disable`, "invalid address %q", c.MetricsListen)
		}
	}
	if c.DataDir == "" && (c.SecretKeyFile == "" || (!c.UsesRedis() && c.Store.File == "")) {
		v.add("data_dir", "set data_dir, or secret_key_file and store.file", "empty")
	}
	if c.ShutdownTimeout <= 0 {
		v.add("shutdown_timeout", `use a duration such as "30s"`, "must be positive")
	}

	v.oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", c.Log.Format, "text", "json")

	l := c.Limits
	if l.MaxMessageBytes < 1024 {
		v.add("limits.max_message_bytes", "use at least 1KiB", "too small: %d", l.MaxMessageBytes)
	}
	v.positive("limits.max_headers", l.MaxHeaders)
	if l.MaxTextBytes < 1024 {
		v.add("limits.max_text_bytes", "use at least 1KiB", "too small: %d", l.MaxTextBytes)
	}
	v.positive("limits.max_mime_depth", l.MaxMIMEDepth)
	v.positive("limits.max_mime_parts", l.MaxMIMEParts)
	if l.MaxHeaderBytes < 1024 {
		v.add("limits.max_header_bytes", "use at least 1KiB", "too small: %d", l.MaxHeaderBytes)
	}
	v.positive("limits.max_recipients", l.MaxRecipients)
	if l.MaxHeldBytes < l.MaxMessageBytes {
		v.add("limits.max_held_bytes", "use at least limits.max_message_bytes; 64MiB holds sixteen of the largest messages at once",
			"smaller than limits.max_message_bytes (%d)", l.MaxMessageBytes)
	}
	if l.MaxAnalysisTime <= 0 {
		v.add("limits.max_analysis_time", `use a duration such as "2s"`, "must be positive")
	}

	v.validateSignatures(&c.Signatures)

	if c.Store.Window.D() <= 0 {
		v.add("store.window", `use a duration such as "24h"`, "must be positive")
	}
	v.positive("store.max_entries", c.Store.MaxEntries)
	r := c.Store.Redis
	if r.URL != "" {
		if _, err := store.ParseRedisURL(r.URL); err != nil {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner // without the URL, which may hold a password
			}
			v.add("store.redis.url", "use redis://HOST:PORT/DB, or rediss:// (TLS), unix:///path/redis.sock, redis+sentinel://, redis+cluster:// as docs/operations.md#redis describes", "invalid Redis URL: %v", err)
		}
	}
	if r.URL != "" && len(r.Addrs) > 0 {
		v.add("store.redis", "set either url or addrs", "both url and addrs are set")
	}
	if r.MasterName != "" && r.Cluster {
		v.add("store.redis.cluster", "Sentinel (master_name) and Cluster exclude each other", "both master_name and cluster are set")
	}
	for i, a := range r.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			v.add(fmt.Sprintf("store.redis.addrs[%d]", i), `use "HOST:PORT"`, "invalid address %q", a)
		}
	}
	if r.PoolSize < 0 {
		v.add("store.redis.pool_size", "use 0 for the default or a positive size", "negative")
	}
	if (r.TLS.CertFile == "") != (r.TLS.KeyFile == "") {
		v.add("store.redis.tls", "set both cert_file and key_file, or neither", "client certificate incomplete")
	}

	p := c.Policy
	v.positive("policy.threshold", p.Threshold)
	for name, t := range p.Thresholds {
		path := "policy.thresholds." + name
		if _, err := signature.ParseFamily(name); err != nil {
			v.add(path, "use one of: "+strings.Join(familyNames(), ", "), "unknown signature family %q", name)
		}
		v.positive(path, t)
	}
	if p.StoreTimeout.D() <= 0 || p.StoreTimeout.D() > 20e9 {
		v.add("policy.store_timeout", `use a duration well below Postfix's 30s command timeout, e.g. "500ms"`, "out of range: %s", p.StoreTimeout.D())
	}
	v.oneOf("policy.on_store_error", p.OnStoreError, "accept", "tempfail")
	v.positive("policy.adaptive.floor", p.Adaptive.Floor)
	v.positive("policy.adaptive.recipients_per_step", p.Adaptive.RecipientsPerStep)
	v.networks("policy.relays", p.Relays)
	if id := p.AuthservID; id != "" && (strings.ContainsAny(id, " \t\r\n;()\"=") || !utf8.ValidString(id)) {
		v.add("policy.authserv_id", "use the host name your DKIM verifier writes first in Authentication-Results, e.g. mx.example.com", "invalid authserv-id %q", id)
	}

	a := c.Actions
	if !validHeaderName(a.Header) {
		v.add("actions.header", "use a header field name such as X-Bulk", "invalid header name %q", a.Header)
	}
	if !validHeaderName(a.LevelHeader) {
		v.add("actions.level_header", "use a header field name such as X-Bulk-Level", "invalid header name %q", a.LevelHeader)
	} else if strings.EqualFold(a.LevelHeader, a.Header) {
		v.add("actions.level_header", "use a different name than actions.header", "same as the verdict header")
	}
	if strings.ContainsAny(a.RecipientDetail, "@+ \t\r\n") {
		v.add("actions.recipient_detail", `use a plain word such as "Bulk"`, "invalid detail %q", a.RecipientDetail)
	}
	if strings.ContainsAny(a.SubjectTag, "\r\n") {
		v.add("actions.subject_tag", "remove line breaks", "invalid tag %q", a.SubjectTag)
	}
	v.domains("actions.except_domains", a.ExceptDomains)
	v.addresses("actions.except_recipients", a.ExceptRecipients)
	v.domains("actions.except_senders", a.ExceptSenders)
	if len(a.ExceptSenders) > 0 && c.Policy.AuthservID == "" {
		// Without the site's verifier only what a sender writes is left:
		// a From, a forged Authentication-Results.
		v.add("actions.except_senders", "set policy.authserv_id to the authserv-id your DKIM verifier (OpenDKIM, Rspamd) writes, or empty the list",
			"needs policy.authserv_id: a sender is exempt only by a DKIM signature the site's verifier passed, else anybody could forge the exemption")
	}
	v.domains("actions.header_only_domains", a.HeaderOnlyDomains)
	v.addresses("actions.header_only_recipients", a.HeaderOnlyRecipients)

	f := c.Feedback
	if f.Enabled {
		if !validHeaderName(f.Header) {
			v.add("feedback.header", "use a header field name such as X-Bulk-Feedback", "invalid header name %q", f.Header)
		}
		if strings.EqualFold(f.Header, a.Header) {
			v.add("feedback.header", "use a different name than actions.header", "same as the verdict header")
		}
		if d := f.LoginDomain; d != "" && (strings.ContainsAny(d, "@ \t\r\n") || strings.HasPrefix(d, ".")) {
			v.add("feedback.login_domain", "use a domain such as example.com", "invalid domain %q", d)
		}
		v.networks("feedback.trusted_networks", f.TrustedNetworks)
		v.positive("feedback.global_voters", f.GlobalVoters)
		v.oneOf("feedback.keep", f.Keep, "discard", "deliver")
		if f.VoteTTL.D() <= 0 {
			v.add("feedback.vote_ttl", `use a duration such as "180d"`, "must be positive")
		}
		v.positive("feedback.rate_limit", f.RateLimit)
	}
	c.validateRefile(v)
	return v.probs
}

func (c *Config) validateRefile(v *validator) {
	r := c.Refile
	if !r.Enabled {
		return
	}
	v.oneOf("refile.mover", r.Mover, "doveadm-http", "doveadm", "hook")
	if strings.TrimSpace(r.Folder) == "" || strings.ContainsAny(r.Folder, "\r\n\t\"*%") || strings.EqualFold(r.Folder, "INBOX") {
		v.add("refile.folder", "use a mailbox name such as Bulk", "invalid folder %q", r.Folder)
	}
	v.domains("refile.domains", r.Domains)
	switch r.Mover {
	case "doveadm-http":
		if u, err := url.Parse(r.Doveadm.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add("refile.doveadm.url", "use the doveadm HTTP API, e.g. http://127.0.0.1:8080/doveadm/v1", "invalid URL %q", r.Doveadm.URL)
		}
		if (r.Doveadm.PasswordFile == "") == (r.Doveadm.APIKeyFile == "") {
			v.add("refile.doveadm.password_file", "name the file holding doveadm_password, or api_key_file for doveadm_api_key (one of them)",
				"the doveadm HTTP API needs one credential")
		}
	case "doveadm":
		if r.Doveadm.Command == "" {
			v.add("refile.doveadm.command", "use doveadm or its full path", "empty")
		}
	case "hook":
		if (len(r.Hook.Command) == 0) == (r.Hook.URL == "") {
			v.add("refile.mover", "set refile.hook.command (program and arguments) or refile.hook.url, not both", "the hook needs a command or a URL")
		}
		if u, err := url.Parse(r.Hook.URL); r.Hook.URL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			v.add("refile.hook.url", "use an http or https URL", "invalid URL %q", r.Hook.URL)
		}
	}
	v.positive("refile.max_entries", r.MaxEntries)
	v.positive("refile.max_per_campaign", r.MaxPerCampaign)
	v.positive("refile.max_queue", r.MaxQueue)
	if r.Retries < 0 {
		v.add("refile.retries", "use 0 or more", "must not be negative, got %d", r.Retries)
	}
	for _, d := range []struct {
		path string
		d    Duration
	}{{"refile.backoff", r.Backoff}, {"refile.max_backoff", r.MaxBackoff}, {"refile.timeout", r.Timeout}} {
		if d.d <= 0 {
			v.add(d.path, `use a duration such as "10s"`, "must be positive")
		}
	}
}

// checkFiles reports the files the configuration names that this process
// cannot read: the daemon would fail to start, or to reload, on them.
func (c *Config) checkFiles(lines lineIndex) Problems {
	v := &validator{file: c.file, lines: lines}
	files := [][2]string{{"signatures.lexicon", c.Signatures.Lexicon}}
	if c.UsesRedis() {
		r := c.Store.Redis
		files = append(files, [][2]string{
			{"store.redis.password_file", r.PasswordFile},
			{"store.redis.tls.ca_file", r.TLS.CAFile},
			{"store.redis.tls.cert_file", r.TLS.CertFile},
			{"store.redis.tls.key_file", r.TLS.KeyFile},
		}...)
	}
	if c.Refile.Enabled && c.Refile.Mover == "doveadm-http" {
		files = append(files, [][2]string{
			{"refile.doveadm.password_file", c.Refile.Doveadm.PasswordFile},
			{"refile.doveadm.api_key_file", c.Refile.Doveadm.APIKeyFile},
		}...)
	}
	for _, f := range files {
		path, name := f[0], f[1]
		if name == "" {
			continue
		}
		fh, err := os.Open(name)
		switch {
		case err == nil:
			fh.Close()
		case errors.Is(err, fs.ErrNotExist):
			v.add(path, "check the path; relative paths start from the daemon's working directory", "no such file %s", name)
		case errors.Is(err, fs.ErrPermission):
			v.add(path, "make it readable by the user the daemon runs as (bulkmilter)", "%s is not readable by this user", name)
		default:
			v.add(path, "", "cannot read %s: %v", name, err)
		}
	}
	return v.probs
}

// familyNames lists the signature families by name, in numeric order.
func familyNames() []string {
	var out []string
	for _, f := range signature.Families() {
		out = append(out, f.String())
	}
	return out
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r >= 0x7f || r == ':' {
			return false
		}
	}
	return true
}

// ParseListen splits a milter socket in Postfix's syntax into a network
// and an address for net.Listen: "inet:127.0.0.1:7357" → ("tcp",
// "127.0.0.1:7357"), "unix:/run/x.sock" → ("unix", "/run/x.sock"). The
// Sendmail form "inet:PORT@HOST" and "local:PATH" are accepted too.
func ParseListen(s string) (network, addr string, err error) {
	kind, rest, ok := strings.Cut(s, ":")
	if !ok || rest == "" {
		return "", "", fmt.Errorf("invalid socket %q", s)
	}
	switch kind {
	case "inet", "inet6", "tcp":
		if port, host, ok := strings.Cut(rest, "@"); ok {
			rest = net.JoinHostPort(host, port)
		}
		host, port, err := net.SplitHostPort(rest)
		if err != nil {
			return "", "", fmt.Errorf("invalid socket %q: %v", s, err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			return "", "", fmt.Errorf("invalid port in socket %q", s)
		}
		return "tcp", net.JoinHostPort(host, port), nil
	case "unix", "local":
		if !strings.HasPrefix(rest, "/") && !strings.HasPrefix(rest, ".") {
			return "", "", fmt.Errorf("unix socket path %q must be absolute", rest)
		}
		return "unix", rest, nil
	}
	return "", "", fmt.Errorf("invalid socket %q: unknown type %q", s, kind)
}

// ParseNetworks parses a list of networks (ParseNetwork), its key naming
// the element that fails.
func ParseNetworks(key string, ns []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, n := range ns {
		p, err := ParseNetwork(n)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", key, i, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// networks checks a list of networks.
func (v *validator) networks(key string, ns []string) {
	for i, n := range ns {
		if _, err := ParseNetwork(n); err != nil {
			v.add(fmt.Sprintf("%s[%d]", key, i), "use an address or CIDR such as 192.0.2.0/24", "%v", err)
		}
	}
}

// ParseNetwork parses an address or CIDR prefix.
func ParseNetwork(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("invalid network %q", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid network %q", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
