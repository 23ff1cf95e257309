// Package config owns bulkmilter's configuration: the YAML schema, its
// defaults, strict parsing (an unknown key is an error) and validation that
// reports every problem at once, each with its file and line and a hint on
// how to fix it: syntax errors (the parse resumes after each), unknown and
// repeated keys and values of the wrong type (schema.go, in words for a
// person rather than the YAML library's), invalid values, and files that
// cannot be read.
//
// It imports signature and store only to let them judge their own values
// (family parameters, the Redis URL), never to do I/O through them.
//
// The zero-configuration daemon runs on Default(): a milter on
// inet:127.0.0.1:7357, metrics on 127.0.0.1:9357, the embedded store and
// the bundled lexicon.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Config is the whole configuration file.
type Config struct {
	// Listen is the milter socket in Postfix's syntax: inet:HOST:PORT or
	// unix:PATH.
	Listen string `yaml:"listen"`
	// Socket sets the mode and group of a unix milter socket.
	Socket Socket `yaml:"socket"`
	// MetricsListen is HOST:PORT for /metrics, /healthz and /readyz; empty
	// disables the HTTP listener.
	MetricsListen string `yaml:"metrics_listen"`
	// DataDir holds the secret key and the embedded store's file unless
	// they are configured elsewhere.
	DataDir string `yaml:"data_dir"`
	// SecretKeyFile holds the secret that keys every signature hash. It is
	// created with mode 0600 when missing; it must not be readable by
	// others. Every MTA sharing one Redis must use the same secret.
	SecretKeyFile string `yaml:"secret_key_file"`
	// ShutdownTimeout bounds how long SIGTERM waits for sessions to finish.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`

	Log        Log        `yaml:"log"`
	Limits     Limits     `yaml:"limits"`
	Signatures Signatures `yaml:"signatures"`
	Store      Store      `yaml:"store"`
	Policy     Policy     `yaml:"policy"`
	Actions    Actions    `yaml:"actions"`
	Feedback   Feedback   `yaml:"feedback"`
	Refile     Refile     `yaml:"refile"`

	// file is where the configuration was read from, for messages.
	file string
}

// Socket is the mode and group of a unix milter socket.
type Socket struct {
	Mode  string `yaml:"mode"`  // octal, e.g. "0660"
	Group string `yaml:"group"` // group name or id, e.g. "postfix"
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level"`  // debug, info, warn, error
	Format string `yaml:"format"` // text or json
	// Addresses adds the envelope sender and recipients to each message's
	// info line; by default no address is logged.
	Addresses bool `yaml:"addresses"`
}

// Limits bound the work done per message and the memory held; whatever
// is cut is recorded, and the message is analysed on what fits.
type Limits struct {
	MaxMessageBytes Size     `yaml:"max_message_bytes"` // body bytes buffered for analysis
	MaxHeaders      int      `yaml:"max_headers"`       // header fields kept for analysis
	MaxHeaderBytes  Size     `yaml:"max_header_bytes"`  // bytes of header values kept for analysis, all fields
	MaxRecipients   int      `yaml:"max_recipients"`    // envelope recipients kept and counted
	MaxTextBytes    Size     `yaml:"max_text_bytes"`    // decoded text analysed
	MaxMIMEDepth    int      `yaml:"max_mime_depth"`    // MIME nesting, message/rfc822 included
	MaxMIMEParts    int      `yaml:"max_mime_parts"`    // MIME parts visited
	MaxHeldBytes    Size     `yaml:"max_held_bytes"`    // bytes all sessions keep of their messages together
	MaxAnalysisTime Duration `yaml:"max_analysis_time"` // analysis time after which a verdict is marked slow
}

// Signatures chooses the lexicon and the signature families.
type Signatures struct {
	// Lexicon is a lexicon file built by "bulklab lexicon build"; empty
	// means the lexicon bundled in the binary.
	Lexicon string `yaml:"lexicon"`
	// StripRecipient removes the recipient's own name and address from the
	// text before signing.
	StripRecipient bool `yaml:"strip_recipient"`

	IMatch      IMatch      `yaml:"imatch"`
	Shingle     Shingle     `yaml:"shingle"`
	CharShingle CharShingle `yaml:"charshingle"`
	Sift        Sift        `yaml:"sift"`
	TermSet     TermSet     `yaml:"terms"`
	Contain     Contain     `yaml:"contain"`
	Attach      Attach      `yaml:"attach"`
	Lines       Lines       `yaml:"lines"`
}

// IMatch tunes the I-Match family (Chowdhury et al. 2002; Kolcz &
// Chowdhury 2008).
type IMatch struct {
	Enabled        bool    `yaml:"enabled"`
	MinTerms       int     `yaml:"min_terms"`       // fewest lexicon terms to sign
	MinRatio       float64 `yaml:"min_ratio"`       // |S|/|U| under which the secondary lexicon adds terms
	Randomized     int     `yaml:"randomized"`      // K extra randomized lexicons
	RemoveFraction float64 `yaml:"remove_fraction"` // p, share of terms each randomized lexicon drops
	Hardening      string  `yaml:"hardening"`       // context hardening: off, only, also
}

// Sample sizes a min-hash sample and its bands (supershingles).
type Sample struct {
	Rows      int `yaml:"rows"`       // min-hash values per band key
	MinBands  int `yaml:"min_bands"`  // bands of a short message
	MaxBands  int `yaml:"max_bands"`  // bands of a long message (log growth)
	MinUnits  int `yaml:"min_units"`  // fewest units (words, letters, tokens) to sign
	BandUnits int `yaml:"band_units"` // length from which the bands grow (0: min_units)
}

// Shingle tunes word shingles over dictionary words and their
// supershingles (Broder 1997; Yandex 2003).
type Shingle struct {
	Enabled bool   `yaml:"enabled"`
	Width   int    `yaml:"width"` // dictionary words per shingle
	Sample  Sample `yaml:"sample"`
}

// CharShingle tunes character shingles over the letters-only stream.
type CharShingle struct {
	Enabled bool   `yaml:"enabled"`
	Width   int    `yaml:"width"` // letters per shingle
	Sample  Sample `yaml:"sample"`
}

// Sift tunes keyed text sifting (Malkin & Venkatesan 2005).
type Sift struct {
	Enabled       bool    `yaml:"enabled"`
	Formation     string  `yaml:"formation"`      // skip (random skipping) or window
	ClusterLength int     `yaml:"cluster_length"` // tokens per cluster, l
	Acceptance    float64 `yaml:"acceptance"`     // probability a token joins a cluster
	Partitions    int     `yaml:"partitions"`     // b of random partitioning; 1 disables it
	Sample        Sample  `yaml:"sample"`
}

// TermSet tunes min-hash bands over the set of a message's lexicon terms.
type TermSet struct {
	Enabled bool   `yaml:"enabled"`
	Sample  Sample `yaml:"sample"`
}

// Contain tunes single min-hashes of word shingles (containment of a
// padded copy's shared part).
type Contain struct {
	Enabled     bool `yaml:"enabled"`
	Width       int  `yaml:"width"`        // dictionary words per shingle
	Bins        int  `yaml:"bins"`         // single min-hashes, one key each
	MinShingles int  `yaml:"min_shingles"` // fewest shingles to sign
	MinDF       int  `yaml:"min_df"`       // rarest word read, in lexicon documents
}

// Lines tunes keys of a message's own lines of text (a short offer
// padded with text of its own).
type Lines struct {
	Enabled  bool `yaml:"enabled"`
	MinWords int  `yaml:"min_words"` // fewest canonical words of a line to key it
	Keys     int  `yaml:"keys"`      // most keys a message: its lines' smallest hashes
}

// Attach tunes keys of a message's non-text parts (images, PDFs).
type Attach struct {
	Enabled  bool `yaml:"enabled"`
	MinBytes int  `yaml:"min_bytes"` // smallest decoded part signed
	MaxKeys  int  `yaml:"max_keys"`  // distinct parts signed per message
	// WithText signs the parts of messages whose text is signed too; off,
	// only messages no other family signs (image spam) get these keys.
	WithText bool `yaml:"with_text"`
	// Shape keys a GIF, JPEG or PNG image by its shape (an 8×8 average
	// hash), not its bytes, so that images randomised per copy share it.
	Shape     bool `yaml:"shape"`
	MaxPixels int  `yaml:"max_pixels"` // largest image decoded for shape
	// ShortText also signs the shapes of offer-sized images of messages
	// whose signed text has at most this many words (0: never).
	ShortText int `yaml:"short_text"`
	// SoleImage also signs the shape of an offer-sized image that is the
	// message's only non-text part, whatever the length of its text.
	SoleImage bool `yaml:"sole_image"`
	// Remote keys a message no family signs otherwise by the set of its
	// remote images' paths (image spam whose images are on a web server).
	Remote bool `yaml:"remote"`
}

// Store chooses and tunes the volume store.
type Store struct {
	// Window is how long a recipient counts towards a signature's volume.
	Window Duration `yaml:"window"`
	// File persists the embedded store; default DataDir/store.db.
	File string `yaml:"file"`
	// MaxEntries bounds the embedded store; the oldest entries go first.
	MaxEntries int `yaml:"max_entries"`
	// Redis, when its URL or addresses are set, replaces the embedded store.
	Redis Redis `yaml:"redis"`
}

// Redis configures a Redis server, Sentinel or Cluster.
type Redis struct {
	URL          string   `yaml:"url"`   // redis://, rediss://, unix:// (go-redis forms)
	Addrs        []string `yaml:"addrs"` // host:port of the server, Sentinels or cluster nodes
	MasterName   string   `yaml:"master_name"`
	Cluster      bool     `yaml:"cluster"`
	Username     string   `yaml:"username"`
	PasswordFile string   `yaml:"password_file"`
	DB           int      `yaml:"db"`
	PoolSize     int      `yaml:"pool_size"`
	TLS          TLS      `yaml:"tls"`
}

// TLS configures a TLS client.
type TLS struct {
	Enabled    bool   `yaml:"enabled"`
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"`
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

// Policy turns volumes into a verdict.
type Policy struct {
	// Threshold is the volume (distinct recipients in the window) from
	// which a message is bulk, for every family without its own.
	Threshold int `yaml:"threshold"`
	// Thresholds overrides Threshold per family name.
	Thresholds map[string]int `yaml:"thresholds"`
	// StoreTimeout is the per-message budget for Redis calls; the
	// embedded store, in process, is never timed out.
	StoreTimeout Duration `yaml:"store_timeout"`
	// OnStoreError is what happens when the store fails or times out:
	// "accept" delivers the message untagged; "tempfail" asks the sender
	// to retry later.
	OnStoreError string `yaml:"on_store_error"`
	// AuthservID is the authserv-id of the site's own
	// Authentication-Results fields (RFC 8601), written by the DKIM
	// verifier that runs before the milter (OpenDKIM's AuthservID). List
	// and bulk-sender headers count as declared bulk only when a DKIM
	// signature that verified by its result covers them; incoming fields
	// with this id below the verifier's are removed as forged. Empty:
	// nothing is trusted, every mass mailing is undeclared.
	AuthservID string `yaml:"authserv_id"`
	// Relays are the site's own relays (a front MX, a forwarder, a
	// department's gateway), addresses or CIDRs: mail from one counts the
	// client the relay wrote in its Received field as its network.
	Relays []string `yaml:"relays"`
	// Adaptive lets the thresholds follow the site's size; Threshold and
	// Thresholds are then the ceiling.
	Adaptive Adaptive `yaml:"adaptive"`
}

// Adaptive is the adaptive threshold: one step per RecipientsPerStep
// distinct recipients active at the site in the window, within [Floor,
// the configured threshold].
type Adaptive struct {
	Enabled bool `yaml:"enabled"`
	// Networks lets the site's size lower only the threshold of a
	// campaign's distinct sending networks when Enabled is false: list
	// mail comes from its server's one network, so a small site can count
	// networks at the floor while recipients keep the ceiling.
	Networks          bool `yaml:"networks"`
	Floor             int  `yaml:"floor"`
	RecipientsPerStep int  `yaml:"recipients_per_step"`
}

// Actions are what the milter does with a message.
type Actions struct {
	// Header is the verdict header, always added: "yes; family=…" or "no".
	Header string `yaml:"header"`
	// LevelHeader carries the bulk level, 0 (not bulk) to 9, on every
	// message; incoming copies are removed.
	LevelHeader string `yaml:"level_header"`
	// SubjectTag, when set, is prefixed to the Subject of bulk messages.
	SubjectTag string `yaml:"subject_tag"`
	// RecipientDetail, when set, rewrites each recipient of a bulk message
	// to user+DETAIL@domain so the delivery agent files it.
	RecipientDetail string `yaml:"recipient_detail"`
	// Quarantine holds bulk messages in the MTA's hold queue.
	Quarantine bool `yaml:"quarantine"`
	// RevealKeys adds the message's signature keys to the verdict header.
	RevealKeys bool `yaml:"reveal_keys"`
	// ExceptRecipients and ExceptDomains are never tagged or routed: for
	// them a bulk message is not bulk. A domain with a leading dot
	// (".example.com") matches its subdomains.
	ExceptRecipients []string `yaml:"except_recipients"`
	ExceptDomains    []string `yaml:"except_domains"`
	// HeaderOnlyRecipients and HeaderOnlyDomains get the verdict header
	// but no routing: no Subject tag, recipient detail or quarantine on
	// their account; their own filters decide.
	HeaderOnlyRecipients []string `yaml:"header_only_recipients"`
	HeaderOnlyDomains    []string `yaml:"header_only_domains"`
}

// Feedback configures users' "bulk" and "not bulk" votes.
type Feedback struct {
	Enabled bool `yaml:"enabled"`
	// Header carries the vote: "not-bulk" or "bulk".
	Header string `yaml:"header"`
	// TrustAuthenticated accepts feedback from SASL-authenticated senders;
	// the voter is the login.
	TrustAuthenticated bool `yaml:"trust_authenticated"`
	// LoginDomain completes a voter without a domain (a SASL login such as
	// "ann", or a bare envelope sender) to ann@LoginDomain, so that it
	// matches the recipient address the user's mail arrives with. Empty:
	// voters are taken as they are.
	LoginDomain string `yaml:"login_domain"`
	// TrustedNetworks accepts feedback from these client networks; the
	// voter is the envelope sender.
	TrustedNetworks []string `yaml:"trusted_networks"`
	// GlobalVoters is the number of distinct voters after which a vote
	// applies to everyone.
	GlobalVoters int `yaml:"global_voters"`
	// Keep is what happens to the feedback message: "discard" or "deliver".
	Keep string `yaml:"keep"`
	// VoteTTL is how long a vote lasts.
	VoteTTL Duration `yaml:"vote_ttl"`
	// RateLimit is the most votes one voter may cast per hour.
	RateLimit int `yaml:"rate_limit"`
}

// Refile moves the copies of a campaign delivered before its threshold
// from the inbox to Bulk once it crosses the threshold (docs/refile.md).
// When enabled, the recipients and Message-IDs of those copies are kept
// for the store's window, in memory and in File.
type Refile struct {
	Enabled bool `yaml:"enabled"`
	// Mover is how copies are moved: "doveadm-http" (Dovecot's doveadm
	// HTTP API), "doveadm" (the command) or "hook".
	Mover string `yaml:"mover"`
	// Folder is the destination mailbox, created when missing.
	Folder string `yaml:"folder"`
	// Domains limits refiling to recipients of these domains (the mail
	// store's own); empty means every recipient.
	Domains []string      `yaml:"domains"`
	Doveadm RefileDoveadm `yaml:"doveadm"`
	Hook    RefileHook    `yaml:"hook"`
	// File keeps the ledger and the move queue across restarts; default
	// DataDir/refile.json.
	File string `yaml:"file"`
	// MaxEntries bounds the copies remembered in all (the oldest go
	// first), MaxPerCampaign per campaign, MaxQueue those waiting to move.
	MaxEntries     int `yaml:"max_entries"`
	MaxPerCampaign int `yaml:"max_per_campaign"`
	MaxQueue       int `yaml:"max_queue"`
	// Retries bounds the attempts after the first; Backoff is the first
	// wait, doubled up to MaxBackoff.
	Retries    int      `yaml:"retries"`
	Backoff    Duration `yaml:"backoff"`
	MaxBackoff Duration `yaml:"max_backoff"`
	// Timeout bounds one call to the mail store, the hook or the votes.
	Timeout Duration `yaml:"timeout"`
}

// RefileDoveadm reaches Dovecot.
type RefileDoveadm struct {
	// URL is the doveadm HTTP API (mover doveadm-http), e.g.
	// http://127.0.0.1:8080/doveadm/v1.
	URL string `yaml:"url"`
	// PasswordFile holds doveadm_password (Basic auth as "doveadm"), or
	// APIKeyFile doveadm_api_key (X-Dovecot-API); one of them.
	PasswordFile string `yaml:"password_file"`
	APIKeyFile   string `yaml:"api_key_file"`
	// Command is the doveadm program (mover doveadm) and Config its -c.
	Command string `yaml:"command"`
	Config  string `yaml:"config"`
}

// RefileHook hands the copies to another mail store as JSON: a command
// (program and arguments) reading it on stdin, or a URL receiving a POST.
type RefileHook struct {
	Command []string `yaml:"command"`
	URL     string   `yaml:"url"`
}

// Default returns the configuration used when no file is given.
func Default() Config {
	return Config{
		Listen:          "inet:127.0.0.1:7357",
		Socket:          Socket{Mode: "0660"},
		MetricsListen:   "127.0.0.1:9357",
		DataDir:         defaultDataDir(),
		ShutdownTimeout: Duration(30 * time.Second),
		Log:             Log{Level: "info", Format: "text"},
		Limits: Limits{
			MaxMessageBytes: 4 << 20,
			MaxHeaders:      1000,
			MaxHeaderBytes:  256 << 10,
			MaxRecipients:   100_000,
			MaxTextBytes:    1 << 20,
			MaxMIMEDepth:    32,
			MaxMIMEParts:    256,
			MaxHeldBytes:    64 << 20,
			MaxAnalysisTime: Duration(2 * time.Second),
		},
		Signatures: defaultSignatures(),
		Store:      Store{Window: Duration(24 * time.Hour), MaxEntries: 2_000_000},
		Policy: Policy{
			Threshold:    10,
			StoreTimeout: Duration(500 * time.Millisecond),
			OnStoreError: "accept",
			Adaptive:     Adaptive{Enabled: false, Networks: true, Floor: 5, RecipientsPerStep: 2500},
		},
		Actions: Actions{Header: "X-Bulk", LevelHeader: "X-Bulk-Level"},
		Feedback: Feedback{
			Enabled:            true,
			Header:             "X-Bulk-Feedback",
			TrustAuthenticated: true,
			GlobalVoters:       3,
			Keep:               "discard",
			VoteTTL:            Duration(180 * 24 * time.Hour),
			RateLimit:          100,
		},
		Refile: Refile{
			Mover:          "doveadm-http",
			Folder:         "Bulk",
			Doveadm:        RefileDoveadm{URL: "http://127.0.0.1:8080/doveadm/v1", Command: "doveadm"},
			MaxEntries:     200_000,
			MaxPerCampaign: 1000,
			MaxQueue:       100_000,
			Retries:        10,
			Backoff:        Duration(10 * time.Second),
			MaxBackoff:     Duration(10 * time.Minute),
			Timeout:        Duration(10 * time.Second),
		},
	}
}

// defaultDataDir follows systemd's StateDirectory when set, then the
// system location when it is writable, then the user's state directory.
func defaultDataDir() string {
	if d := os.Getenv("STATE_DIRECTORY"); d != "" {
		return d
	}
	const system = "/var/lib/bulkmilter"
	if fi, err := os.Stat(system); err == nil && fi.IsDir() {
		return system
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "bulkmilter")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "bulkmilter")
	}
	return "bulkmilter-data"
}

// File returns the file the configuration was read from, or "" for the
// defaults.
func (c *Config) File() string { return c.file }

// SecretKeyPath returns the secret key file, defaulting into DataDir.
func (c *Config) SecretKeyPath() string {
	if c.SecretKeyFile != "" {
		return c.SecretKeyFile
	}
	return filepath.Join(c.DataDir, "secret.key")
}

// StoreFile returns the embedded store's file, defaulting into DataDir.
func (c *Config) StoreFile() string {
	if c.Store.File != "" {
		return c.Store.File
	}
	return filepath.Join(c.DataDir, "store.db")
}

// RefileFile returns the refiling ledger's file, defaulting into DataDir.
func (c *Config) RefileFile() string {
	if c.Refile.File != "" {
		return c.Refile.File
	}
	return filepath.Join(c.DataDir, "refile.json")
}

// UsesRedis reports whether the Redis store is configured.
func (c *Config) UsesRedis() bool {
	return c.Store.Redis.URL != "" || len(c.Store.Redis.Addrs) > 0
}

// ThresholdFor returns the bulk threshold of a family.
func (c *Config) ThresholdFor(family string) int {
	if t, ok := c.Policy.Thresholds[family]; ok {
		return t
	}
	return c.Policy.Threshold
}

// String describes where the configuration came from.
func (c *Config) String() string {
	if c.file == "" {
		return "built-in defaults"
	}
	return fmt.Sprintf("config file %s", c.file)
}
