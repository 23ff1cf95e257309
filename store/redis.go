package store

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

//go:embed script.lua
var scriptSrc string

var script = redis.NewScript(scriptSrc)

// SchemaVersion is the version of the Redis key schema, part of every key
// name ("bm2:"). A change of layout or semantics bumps it, so a new daemon
// never misreads an old one's keys.
const SchemaVersion = 2

// Defaults for RedisOptions.
const (
	DefaultRedisTimeout    = time.Second
	DefaultFirstSightSplit = 2
	// FirstSightCap is the number of 8-byte records a first-sighting
	// string holds before new keys skip it (and get an exact set at once).
	FirstSightCap = 1024
)

// RedisOptions configures NewRedis. One struct covers a single server,
// Sentinel and Cluster:
//
//   - MasterName set: Sentinel; Addrs are the sentinels.
//   - Cluster, or more than one address: Cluster; Addrs are seed nodes.
//   - otherwise: one server at Addrs[0] (host:port, or a Unix socket path
//     starting with "/").
type RedisOptions struct {
	Addrs      []string
	Cluster    bool   // cluster mode even with one seed address
	MasterName string // Sentinel master name

	Username, Password string // ACL user (or only a password)
	// Sentinel's own credentials, when they differ from the data nodes'.
	SentinelUsername, SentinelPassword string

	DB  int         // single server and Sentinel only
	TLS *TLSOptions // nil: no TLS

	PoolSize int // connections per node; 0: go-redis default (10 per CPU)
	// Timeout bounds every store call; a caller's earlier context deadline
	// wins. Also the socket read and write timeout. Default 1s.
	Timeout time.Duration
	// DialTimeout bounds connecting; default Timeout.
	DialTimeout time.Duration
	// MaxRetries is how often go-redis retries a call that failed on the
	// network, within the call's deadline. Retrying is safe because every
	// write is idempotent (see the package doc). 0 means 1; -1 disables.
	MaxRetries int
	// DisableIdentity skips CLIENT SETINFO on connect (for servers without
	// it, such as some managed services).
	DisableIdentity bool
	ClientName      string
	Protocol        int // RESP version, 2 or 3; 0: go-redis default (3)

	// Namespace is prepended to every key (before "bm2:"), to keep several
	// independent deployments apart in one database. It must not contain
	// '{' or '}'.
	Namespace string
	// FirstSightSplit is the number of first-sighting strings per hash tag
	// and time bucket, sized to the traffic (see docs/performance.md):
	// about messages per bucket × keys per message / (16384 × 400). The
	// first daemon to use a database records its value in bm2:meta and
	// every later daemon uses the recorded value, whatever its own
	// (daemons must agree; Limits reports the value in effect). To change
	// it: HSET bm2:meta fs_split N, then restart the daemons; first
	// sightings recorded under the old value are missed for one window.
	// Default 2.
	FirstSightSplit int

	Observer Observer // may be nil

	Params
}

// TLSOptions configures TLS to Redis. Certificates are verified unless
// InsecureSkipVerify is set.
type TLSOptions struct {
	CAFile             string // PEM bundle of the CAs to trust; empty: system roots
	CertFile, KeyFile  string // client certificate, for servers that require one
	ServerName         string // name to verify; empty: the host of the address
	InsecureSkipVerify bool
}

func (t *TLSOptions) config() (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // explicit admin choice, off by default
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read tls ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca file %s: no PEM certificate found", t.CAFile)
		}
		c.RootCAs = pool
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return nil, errors.New("tls: cert file and key file must be set together")
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load tls client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// connReadBuffer and connWriteBuffer are each Redis connection's
// buffers. A reply is a few hundred bytes; a message's script call about
// 5.5 KB (43 keys), which a 4 KiB buffer wrote in two system calls and
// two TCP segments, so that Redis could wake up for half a command.
const (
	connReadBuffer  = 4 << 10
	connWriteBuffer = 16 << 10
)

// Redis is the store on a Redis server, Sentinel or Cluster. It is safe for
// concurrent use.
type Redis struct {
	c        counting
	client   redis.UniversalClient
	cluster  bool
	prefix   string // Namespace + "bm2:"
	split    uint64 // requested; the value in effect is fsSplit
	timeout  time.Duration
	observer Observer
	present  present // the latest time counted (ahead.go)
	written  written // the newest bucket written in each ring slot (ahead.go)
	// xslot: a Cluster whose primaries all run Redis 7.0 or later takes
	// a message's pointer reads, and its writes, as one script call a
	// primary (script.lua's 'X'), not one a slot; perSlot keeps one a
	// slot (tests, the benchmark's before).
	xslot, perSlot atomic.Bool

	mu       sync.Mutex // guards the fields below
	prepared bool
	fsCap    int    // records allowed in a first-sighting string
	exact    int    // exact limit after fitting the listpack limit
	fsSplit  uint64 // first-sighting split recorded in bm2:meta
}

// NewRedis connects to Redis. It succeeds while Redis is unreachable (mail
// must keep flowing; calls then fail with ErrUnavailable until Redis
// answers), but fails on invalid options, refused credentials, or a
// database already used with a different window or secret.
func NewRedis(ctx context.Context, o RedisOptions) (*Redis, error) {
	c, err := o.Params.resolve()
	if err != nil {
		return nil, fmt.Errorf("redis store: %w", err)
	}
	if len(o.Addrs) == 0 {
		return nil, errors.New("redis store: no address")
	}
	if strings.ContainsAny(o.Namespace, "{}") {
		return nil, fmt.Errorf("redis store: namespace %q must not contain '{' or '}'", o.Namespace)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultRedisTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = o.Timeout
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = 1
	case o.MaxRetries < 0:
		o.MaxRetries = -1
	}
	if o.FirstSightSplit <= 0 {
		o.FirstSightSplit = DefaultFirstSightSplit
	}
	if o.FirstSightSplit > 256 {
		return nil, fmt.Errorf("redis store: first-sight split %d: at most 256", o.FirstSightSplit)
	}
	tc, err := o.TLS.config()
	if err != nil {
		return nil, fmt.Errorf("redis store: %w", err)
	}
	uo := &redis.UniversalOptions{
		Addrs:            o.Addrs,
		IsClusterMode:    o.Cluster,
		MasterName:       o.MasterName,
		Username:         o.Username,
		Password:         o.Password,
		SentinelUsername: o.SentinelUsername,
		SentinelPassword: o.SentinelPassword,
		DB:               o.DB,
		TLSConfig:        tc,
		PoolSize:         o.PoolSize,
		// Our replies are a few hundred bytes, commands a few KB. go-redis's
		// buffers (32 KiB, and 128 KiB on a second pool it keeps for
		// pipelines) are held by every idle connection, and go-redis never
		// closes idle connections: on a cluster, a master that failed keeps
		// its pool after it rejoins as a replica, so each failover left
		// megabytes behind (TestClusterFailoversKeepNoBuffers). One pool of
		// small buffers keeps that to kilobytes.
		ReadBufferSize:   connReadBuffer,
		WriteBufferSize:  connWriteBuffer,
		PipelinePoolSize: -1,
		ClientName:       o.ClientName,
		Protocol:         o.Protocol,
		DisableIdentity:  o.DisableIdentity,
		// The caller's deadline must bound an in-flight read (default false
		// in go-redis: a 300ms context waited for the 5s read timeout).
		ContextTimeoutEnabled: true,
		DialTimeout:           o.DialTimeout,
		ReadTimeout:           o.Timeout,
		WriteTimeout:          o.Timeout,
		PoolTimeout:           o.Timeout,
		MaxRetries:            o.MaxRetries,
		MinRetryBackoff:       5 * time.Millisecond,
		MaxRetryBackoff:       50 * time.Millisecond,
		// One dial attempt per try: go-redis's default (5 attempts 100ms
		// apart) spends the whole budget on a server that refuses
		// connections instead of failing fast.
		DialerRetries: 1,
		// Servers without CLIENT MAINT_NOTIFICATIONS log or count errors.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
	client := redis.NewUniversalClient(uo)
	_, isCluster := client.(*redis.ClusterClient)
	r := &Redis{
		c:        c,
		client:   client,
		cluster:  isCluster,
		prefix:   o.Namespace + "bm" + strconv.Itoa(SchemaVersion) + ":",
		split:    uint64(o.FirstSightSplit),
		timeout:  o.Timeout,
		observer: o.Observer,
		written:  make(written, c.nb),
	}
	pctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := r.prepare(pctx); err != nil && !errors.Is(err, ErrUnavailable) {
		client.Close()
		return nil, err
	}
	return r, nil
}

// RedisLogTo sends go-redis's own log lines (one per failed dial, for
// example) to l at debug level instead of stderr. The store already returns
// every failure to its caller and its Observer, so at the default level
// these lines would only flood the log during an outage. go-redis's logger
// is process-wide: call this once, from main. A nil l discards them.
func RedisLogTo(l *slog.Logger) {
	redis.SetLogger(redisLogger{l})
}

type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	if r.l != nil {
		r.l.DebugContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
	}
}

// Client returns the underlying go-redis client, for pool metrics
// (PoolStats) and hooks. Do not write bm2 keys through it.
func (r *Redis) Client() redis.UniversalClient { return r.client }

// prepare runs once per store when Redis first answers: it checks (or
// records) the parameters every daemon sharing the database must agree on,
// and reads the server's listpack limit, which sizes the first-sighting
// hashes and the exact tier.
func (r *Redis) prepare(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prepared {
		return nil
	}
	meta := r.prefix + "meta"
	want := map[string]string{
		"schema":    strconv.Itoa(SchemaVersion),
		"bucket_ms": strconv.FormatInt(r.c.bucketLen.Milliseconds(), 10),
		"buckets":   strconv.Itoa(r.c.Buckets),
		"key_id":    r.c.keyID,
	}
	// HSETNX per field then read back: the first daemon writes, the others
	// compare, in one round trip.
	pipe := r.client.Pipeline()
	fields := []string{"schema", "bucket_ms", "buckets", "key_id"}
	for _, f := range fields {
		pipe.HSetNX(ctx, meta, f, want[f])
	}
	pipe.HSetNX(ctx, meta, "fs_split", strconv.FormatUint(r.split, 10))
	got := pipe.HGetAll(ctx, meta)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("redis store: read %s: %w", meta, classify(err))
	}
	var diffs []string
	for _, f := range fields {
		if g := got.Val()[f]; g != want[f] {
			diffs = append(diffs, fmt.Sprintf("%s is %q in Redis, %q here", f, g, want[f]))
		}
	}
	if len(diffs) > 0 {
		return fmt.Errorf("redis store: database already used with other parameters (%s): "+
			"use the same window, buckets and secret on every daemon; to start over, "+
			"DEL %s (a different secret also orphans all stored votes)", strings.Join(diffs, "; "), meta)
	}
	split, err := strconv.ParseUint(got.Val()["fs_split"], 10, 64)
	if err != nil || split < 1 || split > 256 {
		return fmt.Errorf("redis store: %s has fs_split %q, want 1 to 256", meta, got.Val()["fs_split"])
	}
	r.fsSplit = split
	r.fsCap = FirstSightCap
	listpack := 128 // Redis 7.0's default hash-max-listpack-entries
	if v, err := r.client.ConfigGet(ctx, "hash-max-listpack-entries").Result(); err == nil {
		if n, err := strconv.Atoi(v["hash-max-listpack-entries"]); err == nil && n > 0 {
			listpack = n
		}
	} else if errors.Is(classify(err), ErrUnavailable) {
		return fmt.Errorf("redis store: config get: %w", classify(err))
	} // else CONFIG is disabled (managed services): keep the default
	// The exact set holds its recipients plus one tally field; keep it in
	// listpack encoding.
	r.exact = max(1, min(r.c.ExactLimit, listpack-1))
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		x, err := crossSlot(ctx, cc)
		if errors.Is(classify(err), ErrUnavailable) {
			return fmt.Errorf("redis store: info server: %w", classify(err))
		}
		r.xslot.Store(x) // else INFO is disabled (managed services): one call a slot
	}
	r.prepared = true
	return nil
}

// crossSlot reports whether every primary of the Cluster runs Redis 7.0
// or later, whose scripts without a shebang may reach undeclared keys of
// every slot the node serves (script.lua's 'X'): the one version whose
// rules were read (script.c's scriptVerifyClusterState) and tested here.
func crossSlot(ctx context.Context, cc *redis.ClusterClient) (bool, error) {
	var old atomic.Bool
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return err
		}
		if redisMajor(info) < 7 {
			old.Store(true)
		}
		return nil
	})
	return err == nil && !old.Load(), err
}

// redisMajor is the major version in INFO server's redis_version, or 0.
func redisMajor(info string) int {
	_, v, ok := strings.Cut(info, "redis_version:")
	if !ok {
		return 0
	}
	v, _, _ = strings.Cut(v, ".")
	n, _ := strconv.Atoi(v)
	return n
}

// Limits are the sizes in effect for a Redis store.
type Limits struct {
	FirstSightCap   int // records per first-sighting string
	ExactLimit      int // distinct recipients counted exactly (fits hash-max-listpack-entries)
	FirstSightSplit int // as recorded in bm2:meta
}

// Limits returns the sizes in effect, and whether they were read from the
// server yet (they are once Redis has answered).
func (r *Redis) Limits() (Limits, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Limits{r.fsCap, r.exact, int(r.fsSplit)}, r.prepared
}

func (r *Redis) limits(ctx context.Context) (Limits, error) {
	if l, ok := r.Limits(); ok {
		return l, nil
	}
	if err := r.prepare(ctx); err != nil {
		return Limits{}, err
	}
	l, _ := r.Limits()
	return l, nil
}

// sigKeys are the names of one signature's keys: its pointer strings
// (oldest bucket first) and its vote hash.
type sigKeys struct {
	tag   string
	slot  int
	field string // pointer field: low 32 bits of the hash, the top one set for a support family's
	keys  [3]string
	sup   bool // a key of a support family but the line family (its records keep no class, and its older ones 2 bytes of check)
}

func (r *Redis) tagOf(h uint64) string {
	var b [4]byte
	return string(appendTag(b[:0], h))
}

// appendTag appends a signature's hash tag: the top 14 bits of its hash,
// as 4 hex digits.
func appendTag(b []byte, h uint64) []byte {
	const hex = "0123456789abcdef"
	t := h >> 50
	return append(b, hex[t>>12&0xf], hex[t>>8&0xf], hex[t>>4&0xf], hex[t&0xf])
}

// sigKeysOf names the keys of a message's signatures (each one's current
// and older pointer strings and its vote hash) in one allocation: a
// message has some forty signatures, and a string each was a quarter of
// the Redis milter's objects. The names hold no bucket: the strings do.
func (r *Redis) sigKeysOf(ids []string, split uint64) []sigKeys {
	var numArr [20]byte
	n := len(ids) * (3*(len(r.prefix)+len("{0000}:")) + 2*len(strconv.AppendUint(numArr[:0], split-1, 10)) + len("kc:ko:v:") + 4)
	for _, id := range ids {
		n += len(id)
	}
	var b strings.Builder
	b.Grow(n)
	sks := make([]sigKeys, len(ids))
	for i, id := range ids {
		sks[i] = r.appendSigKeys(&b, id, split)
	}
	return sks
}

// appendSigKeys writes one signature's key names to b and returns them.
// A Builder's string shares its buffer and appending never changes the
// bytes already written, so each signature's names are sliced from it as
// soon as they are written.
func (r *Redis) appendSigKeys(b *strings.Builder, id string, split uint64) sigKeys {
	h := sigHash(id)
	var preArr [64]byte
	pre := append(preArr[:0], r.prefix...)
	pre = append(pre, '{')
	pre = appendTag(pre, h)
	pre = append(pre, '}', ':')
	var numArr [20]byte
	sub := strconv.AppendUint(numArr[:0], (h>>32)%split, 10)
	start := b.Len()
	var ends [3]int
	for i, kind := range [2]string{"kc:", "ko:"} {
		b.Write(pre)
		b.WriteString(kind)
		b.Write(sub)
		ends[i] = b.Len() - start
	}
	b.Write(pre)
	b.WriteString("v:")
	b.WriteString(id)
	ends[2] = b.Len() - start
	// The top bit of the check tells the script a support family's
	// record from the others in a current string, whose records are in
	// the order written (script.lua's cur_split); a line key's record is
	// as the others, whole with its class (model.go's keepsClass).
	sup := !keepsClass(familyOf(id))
	var f [4]byte
	binary.BigEndian.PutUint32(f[:], uint32(h)&0x7fffffff)
	if sup {
		f[0] |= 0x80
	}
	b.Write(f[:])
	all := b.String()[start:]
	keys := [3]string{all[:ends[0]], all[ends[0]:ends[1]], all[ends[1]:ends[2]]}
	tag := all[len(r.prefix)+1 : len(r.prefix)+5]
	return sigKeys{tag: tag, slot: slotOf(tag), field: all[ends[2]:], keys: keys, sup: sup}
}

// campTag is a campaign's hash tag: the top 14 of its ref's 29 bits.
func campTag(ref uint32) string { return fmt.Sprintf("%04x", ref>>15) }

// campKeys names a campaign's keys as the script's camp_keys does: nb
// first-sighting strings, the exact set, nb HyperLogLogs (oldest bucket
// first), and its first-sighting field.
func (r *Redis) campKeys(ref uint32, cb int64, split uint64) (keys []string, field string) {
	base := r.prefix + "{" + campTag(ref) + "}:"
	h := strconv.FormatUint(uint64(ref), 16)
	nb := r.c.nb
	keys = make([]string, 0, 2*nb+1)
	oldest := cb - int64(nb) + 1
	for i := range nb {
		keys = append(keys, base+"f:"+strconv.FormatUint(uint64(ref)%split, 10)+":"+strconv.FormatInt(oldest+int64(i), 10))
	}
	keys = append(keys, base+"x:"+h)
	for i := range nb {
		keys = append(keys, base+"c:"+h+":"+strconv.FormatInt(oldest+int64(i), 10))
	}
	return keys, string(binary.BigEndian.AppendUint32(nil, ref))
}

// voteKey names the vote hash of a signature id, or of a campaign
// (CampaignVoteKey) in its campaign's slot, where observing reads it.
func (r *Redis) voteKey(id string) string {
	if ref, ok := campaignOfVoteKey(id); ok {
		return r.prefix + "{" + campTag(ref) + "}:v:" + id
	}
	return r.prefix + "{" + r.tagOf(sigHash(id)) + "}:v:" + id
}

func (r *Redis) voterKey(p pseudonym) string {
	return r.prefix + "{" + fmt.Sprintf("%04x", uint64(p)>>34) + "}:u:" + p.String()
}

func (r *Redis) observe(op string, start time.Time, err error) {
	if r.observer != nil {
		r.observer.ObserveRequest(op, time.Since(start), err)
	}
}

// Observe records the observation in its campaign (model.go) and returns
// the campaign and its keys' volumes and votes: one script call on a
// single server; on a cluster one pipeline reads the pointers and votes
// (one call per slot) and, once Go decided, a second writes the pointers
// and counts the campaign.
func (r *Redis) Observe(ctx context.Context, o Observation) (Result, error) {
	return r.observeAs(ctx, "observe", o)
}

// within bounds ctx by d, unless its deadline is as near already: the
// pipeline bounds a message's store call by policy.store_timeout, below the
// store's timeout, and a second deadline cost a timer and four objects.
func within(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= d {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// observeAs is Observe reported as op ("observe", or "peek" for Peek).
func (r *Redis) observeAs(ctx context.Context, op string, o Observation) (res Result, err error) {
	start := time.Now()
	defer func() { r.observe(op, start, err) }()
	if err := checkKeys(o.Keys); err != nil {
		return Result{}, fmt.Errorf("observe: %w", err)
	}
	rc, err := r.c.recipients(o.Recipients)
	if err != nil {
		return Result{}, fmt.Errorf("observe: %w", err)
	}
	res = Result{Volumes: make([]int64, len(o.Keys)), Votes: make([]Tally, len(o.Keys))}
	if len(o.Keys) == 0 {
		return res, nil
	}
	ctx, cancel := within(ctx, r.timeout)
	defer cancel()
	lim, err := r.limits(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("observe: %w", err)
	}
	t, ahead := r.c.countAt(&r.present, o.Time)
	if ahead {
		noteAhead(r.observer, "observation", 1, o.Time, t)
	}
	ob := &redisObs{r: r, lim: lim, o: o, rc: rc, t: t, cb: r.c.bucket(t), ids: uniq(o.Keys)}
	// A message reads no pointer of a bucket of its window that this
	// store's ring of buckets no longer holds, and one of such a bucket
	// (dated a window or more before what the store wrote since: a wrong
	// Date replayed, a late retry) writes none and keeps no first
	// sighting, as on the embedded store (ahead.go's written); its
	// campaign is counted as any other.
	last := r.c.aheadBucket()
	ob.hidden = r.written.hidden(ob.cb, r.c.nb, last)
	ob.old = ob.hidden[len(ob.hidden)-1] == '1'
	ob.prepare()
	var m campaignOutcome
	if r.cluster {
		m, err = ob.runCluster(ctx)
	} else {
		m, err = ob.runOne(ctx)
	}
	if err != nil {
		return Result{}, fmt.Errorf("observe %d keys: %w", len(ob.ids), err)
	}
	if len(rc.ids) > 0 && !ob.old {
		r.written.note(ob.cb, last)
	}
	res.Campaign = m.assemble(o.Keys, ob.ids, int64(len(rc.ids)), res.Volumes)
	if err := ob.votes(m.votes, m.cvotes, &res); err != nil {
		return Result{}, fmt.Errorf("observe: %w", err)
	}
	return res, nil
}

// redisObs is one observation on its way through Redis.
type redisObs struct {
	r   *Redis
	lim Limits
	o   Observation
	rc  rcptSet
	t   time.Time
	cb  int64
	ids []string // distinct keys
	old bool     // of a hidden bucket (ahead.go's written): writes no pointer
	// hidden is a '0' or '1' per bucket of the window, oldest first: 1
	// for one whose pointers the store's ring no longer holds
	hidden string
	sks    []sigKeys
	fams   []int // family number of each distinct key
	nfam   int
	// aguard is the merge guard's class of each family (aliasGuard), by
	// the family's place: 'a' AliasFamily, 'p' aliasPair, '-' neither;
	// "" when no key is of either
	aguard string
	// nums are the script's numbers, passed by pointer (callScript): an
	// int64 in an interface is a heap object (~10 a message).
	nums [obsNums]int64
}

// Places in redisObs.nums.
const (
	numBucketMs = iota
	numTTLMs
	numBucket
	numCap
	numExact
	numUnix
	numHorizon
	numFresh
	numOrigin
	numNet
	numSender
	numAhead
	obsNums
)

// num returns a pointer to nums[i], set to v.
func (ob *redisObs) num(i int, v int64) *int64 {
	ob.nums[i] = v
	return &ob.nums[i]
}

func (ob *redisObs) prepare() {
	names := map[string]int{}
	ob.sks = ob.r.sigKeysOf(ob.ids, uint64(ob.lim.FirstSightSplit))
	ob.fams = make([]int, 0, len(ob.ids))
	for _, id := range ob.ids {
		f := familyOf(id)
		n, ok := names[f]
		if !ok {
			n = len(names)
			if a := supportAlone(f); a > 0 {
				// the script tells a support family by the sign, and
				// reads the keys it needs alone, their share, their
				// share for a campaign of other senders, and whether it
				// adds up with others, from the number
				n = -1 - n - 256*a - 65536*supportShare(f) - 16777216*supportSpread(f)
				if supportAdds(f) {
					n -= 128 * 16777216
				}
			}
			names[f] = n
		}
		ob.fams = append(ob.fams, n)
	}
	ob.nfam = len(names)
	g, guarded := bytes.Repeat([]byte{'-'}, len(names)), false
	for f, n := range names {
		i := n
		if n < 0 {
			i = (-1 - n) % 256
		}
		switch {
		case f == AliasFamily:
			g[i], guarded = 'a', true
		case aliasPair(f):
			g[i], guarded = 'p', true
		}
	}
	if guarded {
		ob.aguard = string(g)
	}
}

// head is the script arguments modes 'c' and 'r' share.
func (ob *redisObs) head(mode string, sks []sigKeys) ([]string, []any) {
	r, rc := ob.r, ob.rc
	keys := make([]string, 0, 3*len(sks))
	args := make([]any, 0, 16+len(rc.ids)+3*len(sks))
	args = append(args, mode, r.c.nb, ob.num(numBucketMs, r.c.bucketLen.Milliseconds()), ob.num(numTTLMs, r.c.ttl(ob.t, ob.cb).Milliseconds()),
		ob.num(numBucket, ob.cb), ob.num(numCap, int64(ob.lim.FirstSightCap)), ob.num(numExact, int64(ob.lim.ExactLimit)),
		ob.num(numUnix, ob.t.Unix()), ob.num(numHorizon, int64(r.c.VoteHorizon.Seconds())), len(sks), len(rc.ids))
	for _, p := range rc.ids {
		args = append(args, p.bytes())
	}
	// KEYS: every current pointer string, every older one, every vote
	// hash, so that the script passes each range to one command as it is.
	for i := range 3 {
		for _, sk := range sks {
			keys = append(keys, sk.keys[i])
		}
	}
	for i := range sks {
		args = append(args, &sks[i].field) // callScript: a pointer is not copied
	}
	return keys, append(args, supFlags(sks), &ob.hidden) // a pointer: not copied
}

// supFlags is a '0' or '1' per key, 1 for a support family's key: the
// script keeps their older records with 2 bytes of check.
func supFlags(sks []sigKeys) string {
	var b strings.Builder // one allocation, where string([]byte) made two
	b.Grow(len(sks))
	for _, sk := range sks {
		if sk.sup {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	return b.String()
}

// campaignOutcome is what a store learnt of an observation's campaign.
type campaignOutcome struct {
	d                        decision
	known                    bool // the campaign exists (or was just started)
	count, nets, snds, first int64
	votes                    []any // per distinct key {notbulk, bulk, votes}
	cvotes                   any   // the campaign's {notbulk, bulk, votes}, or nil
}

// keyIDs yields each key's index i and its id's index j in ids, which
// are uniq(keys): a key's id is found by walking both in step (a map of
// the ids was 1.8 KB a message, 5 % of the bytes BenchmarkCheck allocates).
func keyIDs(keys, ids []string) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		next := 0 // ids[:next] have been met in keys
		for i, k := range keys {
			j := next
			if j < len(ids) && ids[j] == k {
				next++ // the first of an id: ids are keys' firsts, in order
			} else {
				j = slices.Index(ids, k) // a repeated key
			}
			if !yield(i, j) {
				return
			}
		}
	}
}

// assemble fills vols and returns the campaign: a key that voted for the
// joined campaign (or any key of a new one) carries its volume, a key new
// to a joined campaign this message's own count. ids are uniq(keys).
func (m campaignOutcome) assemble(keys, ids []string, own int64, vols []int64) Campaign {
	if !m.known {
		return Campaign{}
	}
	c := Campaign{ID: m.d.ref, Recipients: m.count, Networks: m.nets, Senders: m.snds, First: time.Unix(m.first, 0)}
	for i, j := range keyIDs(keys, ids) {
		switch {
		case j >= 0 && (!m.d.join || m.d.voters[j]):
			vols[i] = m.count
			if m.d.join {
				if c.Joined == nil { // one allocation, not one a doubling
					c.Joined = make([]int, 0, len(keys)-i)
				}
				c.Joined = append(c.Joined, i)
			}
		default:
			vols[i] = own
		}
	}
	return c
}

func (ob *redisObs) runOne(ctx context.Context) (campaignOutcome, error) {
	r := ob.r
	keys, args := ob.head("c", ob.sks)
	for i := range ob.fams {
		args = append(args, &ob.fams[i]) // a negative int would be copied
	}
	fresh, origin := newRef(ob.ids)
	args = append(args, ob.num(numFresh, int64(fresh)), ob.num(numOrigin, int64(origin)), ob.num(numNet, int64(fp16(ob.o.Network))),
		ob.num(numSender, int64(fp16(ob.o.Sender))), &r.prefix, ob.lim.FirstSightSplit, &ob.aguard, ob.num(numAhead, r.c.aheadBucket()))
	cmd, err := r.runAlone(ctx, keys, args)
	if err != nil {
		return campaignOutcome{}, err
	}
	f, ok := cmd.Val().([]any)
	if !ok || len(f) < 8 {
		return campaignOutcome{}, fmt.Errorf("unexpected script reply %T", cmd.Val())
	}
	// voters: a '0' or '1' per key; votes: a row per key, or none when no
	// key has votes.
	vs, _ := f[6].(string)
	votes, _ := f[7].([]any)
	if len(vs) != len(ob.ids) || (len(votes) != 0 && len(votes) != len(ob.ids)) {
		return campaignOutcome{}, fmt.Errorf("unexpected script reply: %d voters, %d votes for %d keys", len(vs), len(votes), len(ob.ids))
	}
	m := campaignOutcome{votes: votes}
	if len(f) > 8 {
		m.cvotes = f[8]
	}
	m.d = decision{ref: uint32(asInt(f[0])) & refMask, join: asInt(f[1]) == 1, voters: make([]bool, len(vs))}
	for i := range len(vs) {
		m.d.voters[i] = vs[i] == '1'
	}
	if c := asInt(f[2]); c >= 0 {
		m.known, m.count, m.nets, m.snds, m.first = true, c, asInt(f[3]), asInt(f[4]), asInt(f[5])
	}
	return m, nil
}

func (ob *redisObs) runCluster(ctx context.Context) (campaignOutcome, error) {
	r := ob.r
	nb := r.c.nb
	split := uint64(ob.lim.FirstSightSplit)
	write := len(ob.rc.ids) > 0
	// Round trip 1: pointers and votes, one call a primary (or a slot);
	// and which refs near this message's own are free.
	all := make([]int, len(ob.sks))
	for i := range all {
		all[i] = i
	}
	fresh, origin := newRef(ob.ids)
	var cands []uint32
	for ref := fresh; len(cands) < refProbes && ref>>15 == fresh>>15 && ref <= refMask; ref++ {
		cands = append(cands, ref)
	}
	extra := 0
	if write {
		extra = 1
	}
	read := func(p redis.Pipeliner, g callGroup, eval bool) *redis.Cmd {
		sks := make([]sigKeys, len(g.idx))
		for j, k := range g.idx {
			sks[j] = ob.sks[k]
		}
		keys, args := ob.head("r", sks)
		return callGroupScript(ctx, p, eval, g.runs, keys, args)
	}
	groups, cmds, ecmds, err := ob.sigCalls(ctx, "read", ob.groups(ctx, all), read, extra, func(p redis.Pipeliner, _ int, eval bool) *redis.Cmd {
		keys := make([]string, 0, len(cands)*(nb+1))
		args := []any{"q", nb, len(cands), origin}
		for _, ref := range cands {
			ks, field := r.campKeys(ref, ob.cb, split)
			keys = append(keys, ks[nb])
			keys = append(keys, ks[:nb]...)
			args = append(args, field)
		}
		return callScript(ctx, p, eval, keys, append(args, ob.cb-int64(nb)+1))
	})
	if err != nil {
		return campaignOutcome{}, err
	}
	kps := make([]keyPtr, len(ob.ids))
	now := make([]bool, len(ob.ids)) // found in the current bucket
	m := campaignOutcome{votes: make([]any, len(ob.ids))}
	for gi, g := range groups {
		rows, ok := cmds[gi].Val().([]any)
		if !ok || len(rows) != len(g.idx) {
			return campaignOutcome{}, fmt.Errorf("unexpected script reply %T", cmds[gi].Val())
		}
		for j, row := range rows {
			f, ok := row.([]any)
			if !ok || len(f) != 5 {
				return campaignOutcome{}, fmt.Errorf("unexpected script row %v", row)
			}
			k := g.idx[j]
			if v := asInt(f[0]); v >= 0 {
				kps[k] = keyPtr{found: true, p: ptr(v)}
			}
			now[k] = asInt(f[1]) == int64(nb)
			m.votes[k] = f[2:]
		}
	}
	if write {
		fresh = cands[len(cands)-1]
		if i := int(asInt(ecmds[0].Val())); i < len(cands) {
			fresh = cands[i]
		} else if fresh < refMask {
			fresh++ // every candidate live: the next, as the single server
		}
	}
	names := ob.names()
	m.d = decide(names, familyCounts(names), kps, fresh, fp16(ob.o.Sender))
	if !m.d.join && !write {
		return m, nil
	}
	// Round trip 2: the pointers that change, one call a primary (or a
	// slot), and the campaign's count.
	var wsigs []int
	nps := make([]int64, len(ob.sks))
	if write && !ob.old {
		for i := range ob.sks {
			np, changed := repoint(kps[i], m.d, names[i], m.d.weak && m.d.voters[i])
			if !changed && now[i] {
				continue
			}
			nps[i] = int64(np)
			wsigs = append(wsigs, i)
		}
	}
	cv := "0"
	switch {
	case m.d.join && !m.d.weak:
		cv = "r"
	case !m.d.join && write:
		cv = "d"
	}
	withUnion := len(m.d.union) > 0
	writeCall := func(p redis.Pipeliner, g callGroup, eval bool) *redis.Cmd {
		n := len(g.idx)
		keys := make([]string, 0, 2*n)
		args := make([]any, 0, 9+2*n)
		args = append(args, "w", r.c.ttl(ob.t, ob.cb).Milliseconds(), ob.lim.FirstSightCap, n, ob.cb, nb, r.c.bucketLen.Milliseconds())
		sup := make([]sigKeys, n)
		for j, k := range g.idx {
			keys = append(keys, ob.sks[k].keys[0], ob.sks[k].keys[1])
			args = append(args, ob.sks[k].field)
			sup[j] = ob.sks[k]
		}
		for _, k := range g.idx {
			args = append(args, nps[k])
		}
		args = append(args, supFlags(sup), r.c.aheadBucket())
		return callGroupScript(ctx, p, eval, g.runs, keys, args)
	}
	_, _, ecmds, err = ob.sigCalls(ctx, "write", ob.groups(ctx, wsigs), writeCall, 1+len(m.d.union), func(p redis.Pipeliner, i int, eval bool) *redis.Cmd {
		var keys []string
		var args []any
		if i == 0 { // the joined (or new) campaign
			keys, args = ob.countCall(campCall{ref: m.d.ref, write: write, origin: origin, votes: cv, members: withUnion})
		} else { // a campaign counted with it: counted too, its members, its votes untouched
			keys, args = ob.countCall(campCall{ref: m.d.union[i-1], write: write, origin: origin, votes: "0", members: true})
		}
		return callScript(ctx, p, eval, keys, args)
	})
	if err != nil {
		return campaignOutcome{}, err
	}
	f, ok := ecmds[0].Val().([]any)
	if !ok || len(f) < 5 {
		return campaignOutcome{}, fmt.Errorf("unexpected script reply %T", ecmds[0].Val())
	}
	m.cvotes = f[4]
	if c := asInt(f[0]); c >= 0 {
		m.known, m.count, m.nets, m.snds, m.first = true, c, asInt(f[1]), asInt(f[2]), asInt(f[3])
		if withUnion {
			// The union rule (model.go), in Go: the members come from
			// several slots.
			var u union
			replies := []any{f[5:]}
			for _, c := range ecmds[1:] {
				uf, ok := c.Val().([]any)
				switch {
				case ok && len(uf) == 7:
					replies = append(replies, uf[5:])
				case !ok || len(uf) != 5: // 5: a read found no campaign
					return campaignOutcome{}, fmt.Errorf("unexpected script reply %T", c.Val())
				}
			}
			for _, reply := range replies {
				fps, h, err := membersOf(reply)
				if err != nil {
					return campaignOutcome{}, err
				}
				u.add(fps, h)
			}
			m.count = u.count()
		}
	}
	return m, nil
}

// callGroup is one script call's signatures, indexes in redisObs.sks:
// one slot's, or (runs set) one primary's, in runs of one slot each.
type callGroup struct {
	idx  []int
	runs string // "": one slot; else each run's length, "3,5,1"
}

// groups groups sigs one call a primary, by the node go-redis's Cluster
// state gives each slot (xslot), or one call a slot.
func (ob *redisObs) groups(ctx context.Context, sigs []int) []callGroup {
	r := ob.r
	cc, ok := r.client.(*redis.ClusterClient)
	if !ok || !r.xslot.Load() || r.perSlot.Load() {
		return ob.bySlot(sigs)
	}
	var out []callGroup
	at := map[*redis.Client]int{}
	for _, i := range sigs {
		node, err := cc.MasterForKey(ctx, ob.sks[i].keys[0])
		if err != nil {
			return ob.bySlot(sigs) // the calls a slot find their nodes, or fail, as before
		}
		g, ok := at[node]
		if !ok {
			g = len(out)
			at[node] = g
			out = append(out, callGroup{})
		}
		out[g].idx = append(out[g].idx, i)
	}
	for gi := range out {
		g := &out[gi]
		slices.SortStableFunc(g.idx, func(a, b int) int { return ob.sks[a].slot - ob.sks[b].slot })
		var runs []byte
		n := 0
		for j, i := range g.idx {
			n++
			if j == len(g.idx)-1 || ob.sks[g.idx[j+1]].slot != ob.sks[i].slot {
				if len(runs) > 0 {
					runs = append(runs, ',')
				}
				runs = strconv.AppendInt(runs, int64(n), 10)
				n = 0
			}
		}
		if bytes.IndexByte(runs, ',') >= 0 { // else one slot: a plain call
			g.runs = string(runs)
		}
	}
	return out
}

// bySlot groups sigs one call a slot.
func (ob *redisObs) bySlot(sigs []int) []callGroup {
	var out []callGroup
	at := map[int]int{}
	for _, i := range sigs {
		g, ok := at[ob.sks[i].slot]
		if !ok {
			g = len(out)
			at[ob.sks[i].slot] = g
			out = append(out, callGroup{})
		}
		out[g].idx = append(out[g].idx, i)
	}
	return out
}

// sigCalls sends one script call a group and, in the same pipeline,
// extra calls that belong to no group (add), and returns the groups as
// answered, their commands, and the extra ones'. A primary's call the
// server refuses (a slot moved or being migrated since go-redis read the
// Cluster's state, a node that will not run it) is sent again one call a
// slot, which go-redis redirects (MOVED, ASK), and counted: what its
// script wrote before it failed, it writes again, which is idempotent
// (script.lua), and a campaign's count is one of the extra calls, sent
// once.
func (ob *redisObs) sigCalls(ctx context.Context, what string, groups []callGroup, call func(redis.Pipeliner, callGroup, bool) *redis.Cmd,
	extra int, add func(redis.Pipeliner, int, bool) *redis.Cmd) ([]callGroup, []*redis.Cmd, []*redis.Cmd, error) {
	r := ob.r
	cmds := make([]*redis.Cmd, len(groups)+extra)
	soft := make([]bool, len(cmds))
	for i, g := range groups {
		soft[i] = g.runs != ""
	}
	failed, err := r.runSoft(ctx, len(cmds), soft, func(p redis.Pipeliner, i int, eval bool) *redis.Cmd {
		if i < len(groups) {
			cmds[i] = call(p, groups[i], eval)
		} else {
			cmds[i] = add(p, i-len(groups), eval)
		}
		return cmds[i]
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if len(failed) == 0 {
		return groups, cmds[:len(groups)], cmds[len(groups):], nil
	}
	var again []callGroup
	for _, i := range failed {
		if fo, ok := r.observer.(ClusterObserver); ok {
			fo.ObserveClusterFallback(what)
		}
		slog.Debug("redis store: a primary's call sent again one call a slot", "call", what, "err", cmds[i].Err())
		again = append(again, ob.bySlot(groups[i].idx)...)
	}
	acmds := make([]*redis.Cmd, len(again))
	if err := r.run(ctx, len(again), func(p redis.Pipeliner, i int, eval bool) *redis.Cmd {
		acmds[i] = call(p, again[i], eval)
		return acmds[i]
	}); err != nil {
		return nil, nil, nil, err
	}
	var outG []callGroup
	var outC []*redis.Cmd
	for i, g := range groups {
		if !slices.Contains(failed, i) {
			outG, outC = append(outG, g), append(outC, cmds[i])
		}
	}
	return append(outG, again...), append(outC, acmds...), cmds[len(groups):], nil
}

// callGroupScript is callScript for a group's call: a primary's (runs
// set) names its keys in ARGV (script.lua's 'X'), and goes where its
// first key's slot is served.
func callGroupScript(ctx context.Context, p redis.Pipeliner, eval bool, runs string, keys []string, args []any) *redis.Cmd {
	if runs == "" {
		return callScript(ctx, p, eval, keys, args)
	}
	line := make([]any, 0, 6+len(keys)+len(args))
	if eval {
		line = append(line, "eval", scriptSrcArg)
	} else {
		line = append(line, "evalsha", scriptHashArg)
	}
	line = append(line, 0, "X", len(keys), runs)
	for i := range keys {
		line = append(line, &keys[i])
	}
	cmd := redis.NewCmd(ctx, append(line, args...)...)
	cmd.SetFirstKeyPos(6)
	_ = p.Process(ctx, cmd)
	return cmd
}

// flag is a script's '0' or '1'.
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// campCall names the values of one campaign count call (mode 'k').
type campCall struct {
	ref     uint32
	write   bool   // record this message's recipients
	origin  uint32 // the message's own origin (newRef)
	votes   string // "0" untouched, "r" read (a strong join), "d" drop (a new campaign)
	members bool   // a union: the reply adds the campaign's members
}

// countCall builds the keys and arguments of a campaign count call, in
// the order script.lua's mode 'k' reads them.
func (ob *redisObs) countCall(c campCall) ([]string, []any) {
	r := ob.r
	keys, field := r.campKeys(c.ref, ob.cb, uint64(ob.lim.FirstSightSplit))
	keys = append(keys, r.voteKey(CampaignVoteKey(c.ref)))
	args := make([]any, 0, 18+len(ob.rc.ids))
	args = append(args, "k", r.c.nb, r.c.bucketLen.Milliseconds(), r.c.ttl(ob.t, ob.cb).Milliseconds(), ob.cb,
		ob.lim.FirstSightCap, ob.lim.ExactLimit, ob.t.Unix(), len(ob.rc.ids))
	for _, p := range ob.rc.ids {
		args = append(args, p.bytes())
	}
	args = append(args, field, fp16(ob.o.Network), fp16(ob.o.Sender), flag(c.write), c.origin, c.votes,
		int64(r.c.VoteHorizon.Seconds()), flag(c.members), flag(ob.old))
	return keys, args
}

// callScript adds one call of the store script to p: EVALSHA, or EVAL
// (which loads the script) when run retries a NOSCRIPT. It builds the
// command line as go-redis's Eval does, but with each key as a *string,
// which go-redis writes as its value: a pointer fits in an interface,
// where a string is copied to the heap (a message's ~130 key names were
// as many allocations). keys and args must not change until p is sent.
func callScript(ctx context.Context, p redis.Pipeliner, eval bool, keys []string, args []any) *redis.Cmd {
	cmd := scriptCmd(ctx, eval, keys, args)
	_ = p.Process(ctx, cmd) // a pipeline's error comes with Exec
	return cmd
}

// scriptCmd is callScript's command, not yet sent.
func scriptCmd(ctx context.Context, eval bool, keys []string, args []any) *redis.Cmd {
	line := make([]any, 0, 3+len(keys)+len(args))
	if eval {
		line = append(line, "eval", scriptSrcArg)
	} else {
		line = append(line, "evalsha", scriptHashArg)
	}
	line = append(line, len(keys))
	for i := range keys {
		line = append(line, &keys[i])
	}
	cmd := redis.NewCmd(ctx, append(line, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3) // where a Cluster finds the slot
	}
	return cmd
}

// The script's source and hash as arguments, boxed once.
var scriptSrcArg, scriptHashArg any = scriptSrc, script.Hash()

// membersOf reads a campaign's members as the script returns them:
// {HyperLogLog count or -1, {4-byte fingerprints}}.
func membersOf(reply any) ([]uint32, int64, error) {
	f, ok := reply.([]any)
	if !ok || len(f) != 2 {
		return nil, 0, fmt.Errorf("unexpected members reply %v", reply)
	}
	list, _ := f[1].([]any)
	fps := make([]uint32, 0, len(list))
	for _, v := range list {
		s, ok := v.(string)
		if !ok || len(s) != 4 {
			return nil, 0, fmt.Errorf("unexpected member %v", v)
		}
		fps = append(fps, binary.BigEndian.Uint32([]byte(s)))
	}
	return fps, asInt(f[0]), nil
}

// names returns the family of each distinct key as decide takes them.
func (ob *redisObs) names() []string {
	out := make([]string, len(ob.ids))
	for i, id := range ob.ids {
		out[i] = familyOf(id)
	}
	return out
}

// votes fills the tallies and the recipients' own votes from the
// script's per-key rows {notbulk, bulk, {i, vote, ...}} (none when no
// key has votes), and the campaign's from its row.
func (ob *redisObs) votes(rows []any, camp any, res *Result) error {
	if len(rows) != 0 && len(rows) != len(ob.ids) {
		return fmt.Errorf("unexpected vote rows: %d for %d keys", len(rows), len(ob.ids))
	}
	type sigResult struct {
		tally Tally
		own   []ownVote
	}
	var results []sigResult // by distinct key; none when no key has votes
	if len(rows) > 0 {
		results = make([]sigResult, len(rows))
	}
	var when map[string]int64
	rc := ob.rc
	for j, row := range rows {
		tally, own, err := ob.voteRow(row)
		if err != nil {
			return err
		}
		for _, ov := range own {
			if res.UserVotes == nil {
				res.UserVotes = map[string]VoteKind{}
				res.OwnVotes = map[string][]VoteKind{}
			}
			if when == nil {
				when = map[string]int64{}
			}
			mergeUserVotes(res.UserVotes, when, rc.names[ov.rcpt], userVote{kind: ov.kind, at: ov.at})
		}
		results[j] = sigResult{tally, own}
	}
	for i, j := range keyIDs(ob.o.Keys, ob.ids) {
		if j < 0 || results == nil {
			continue // no votes: the tallies stay zero
		}
		sr := results[j]
		res.Votes[i] = sr.tally
		for _, ov := range sr.own {
			setOwnVote(res.OwnVotes, rc.names[ov.rcpt], len(ob.o.Keys), i, ov.kind)
		}
	}
	if camp == nil {
		return nil
	}
	tally, own, err := ob.voteRow(camp)
	if err != nil {
		return err
	}
	res.CampaignVotes = tally
	for _, ov := range own {
		if res.CampaignOwn == nil {
			res.CampaignOwn = map[string]VoteKind{}
		}
		for _, name := range rc.names[ov.rcpt] {
			res.CampaignOwn[name] = ov.kind
		}
	}
	return nil
}

// ownVote is one recipient's vote in a script's vote row.
type ownVote struct {
	rcpt int // index in rcptSet.ids
	kind VoteKind
	at   int64
}

// voteRow reads one vote row {notbulk, bulk, {i, vote, ...}}, keeping the
// recipients' votes cast within the horizon.
func (ob *redisObs) voteRow(row any) (Tally, []ownVote, error) {
	f, ok := row.([]any)
	if !ok || len(f) != 3 {
		return Tally{}, nil, fmt.Errorf("unexpected vote row %v", row)
	}
	horizon := ob.t.Unix() - int64(ob.r.c.VoteHorizon.Seconds())
	var own []ownVote
	uv, _ := f[2].([]any)
	for k := 0; k+1 < len(uv); k += 2 {
		idx := int(asInt(uv[k])) - 1
		v, _ := uv[k+1].(string)
		if idx < 0 || idx >= len(ob.rc.ids) || len(v) < 2 {
			continue
		}
		at, err := strconv.ParseInt(v[1:], 10, 64)
		if err != nil || at <= horizon {
			continue
		}
		own = append(own, ownVote{rcpt: idx, kind: voteFromCode(v[0]), at: at})
	}
	return Tally{NotBulk: asInt(f[0]), Bulk: asInt(f[1])}, own, nil
}

// run sends n script calls in one pipeline. Calls that fail with NOSCRIPT
// (script cache flushed, server restarted, failover, new cluster node) are
// sent again with EVAL, which loads the script: go-redis's Script.Run does
// not fall back inside a pipeline (redis/go-redis#3228).
func (r *Redis) run(ctx context.Context, n int, add func(p redis.Pipeliner, i int, eval bool) *redis.Cmd) error {
	_, err := r.runSoft(ctx, n, nil, add)
	return err
}

// runSoft is run, but a call i with soft[i] that the server answers with
// an error (other than NOSCRIPT) is returned in failed, not as the error.
func (r *Redis) runSoft(ctx context.Context, n int, soft []bool, add func(p redis.Pipeliner, i int, eval bool) *redis.Cmd) (failed []int, err error) {
	cmds := make([]*redis.Cmd, n)
	todo := make([]int, n)
	for i := range todo {
		todo[i] = i
	}
	for eval := false; len(todo) > 0; eval = true {
		pipe := r.client.Pipeline()
		for _, i := range todo {
			cmds[i] = add(pipe, i, eval)
		}
		all, err := pipe.Exec(ctx)
		if err == nil {
			return failed, nil
		}
		at := make(map[redis.Cmder]int, len(todo)) // besides the script calls, a pipeline may hold others (setVotes)
		for _, i := range todo {
			at[cmds[i]] = i
		}
		var again []int
		for _, c := range all {
			e := c.Err()
			i, script := at[c]
			var reply redis.Error
			switch {
			case e == nil:
			case script && !eval && redis.HasErrorPrefix(e, "NOSCRIPT"):
				again = append(again, i)
			case script && soft != nil && soft[i] && errors.As(e, &reply):
				failed = append(failed, i)
			default:
				return nil, classify(e)
			}
		}
		if !eval && len(again) == 0 && len(failed) == 0 {
			return nil, classify(err)
		}
		todo = again
	}
	return failed, nil
}

// runAlone sends one script call by itself, as run does with n = 1 but
// outside a pipeline: the same bytes and round trip, without go-redis's
// pipeline, its command slice and its per-command error checks (about 8
// objects a message on the one-server path).
func (r *Redis) runAlone(ctx context.Context, keys []string, args []any) (*redis.Cmd, error) {
	cmd := scriptCmd(ctx, false, keys, args)
	err := r.client.Process(ctx, cmd)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") { // its errors.As target is an object
		cmd = scriptCmd(ctx, true, keys, args)
		err = r.client.Process(ctx, cmd)
	}
	if err != nil {
		return nil, classify(err)
	}
	return cmd, nil
}

func asInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

// RecordVote stores the vote on each of v.Keys and on their campaign
// (VoteNone retracts the voter's vote) and indexes it under the voter for
// the admin commands: a read of the keys' campaign (Peek), then one round
// trip.
func (r *Redis) RecordVote(ctx context.Context, v Vote) (err error) {
	start := time.Now()
	defer func() { r.observe("vote", start, err) }()
	code, err := v.check()
	if err != nil {
		return fmt.Errorf("record vote: %w", err)
	}
	if len(v.Keys) == 0 {
		return nil
	}
	t, ahead := r.c.countAt(&r.present, v.Time)
	if ahead {
		noteAhead(r.observer, "vote", 1, v.Time, t)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if _, err := r.limits(ctx); err != nil {
		return fmt.Errorf("record vote: %w", err)
	}
	ids, err := withCampaign(ctx, r.observeAs, uniq(v.Keys), t)
	if err != nil {
		return fmt.Errorf("record vote: %w", err)
	}
	err = r.setVotes(ctx, r.c.pseudonym(v.Voter), ids, code, t)
	if err != nil {
		return fmt.Errorf("record vote on %d keys: %w", len(v.Keys), err)
	}
	return nil
}

// setVotes writes (code != 0) or retracts (code == 0) one voter's votes on
// keys, and the voter's index entries, in one pipeline.
func (r *Redis) setVotes(ctx context.Context, voter pseudonym, keys []string, code byte, t time.Time) error {
	kind := "-"
	if code != 0 {
		kind = string(code)
	}
	hz := int64(r.c.VoteHorizon.Seconds())
	ttl := r.c.VoteHorizon + time.Hour
	idx := r.voterKey(voter)
	cmds := make([]*redis.Cmd, len(keys))
	err := r.run(ctx, len(keys)+1, func(p redis.Pipeliner, i int, eval bool) *redis.Cmd {
		if i == len(keys) {
			// The voter's index: signature id -> vote, hash-tagged by voter.
			if code != 0 {
				fv := make([]any, 0, 2*len(keys))
				for _, k := range keys {
					fv = append(fv, k, kind+strconv.FormatInt(t.Unix(), 10))
				}
				p.HSet(ctx, idx, fv...)
				p.PExpire(ctx, idx, ttl)
			} else {
				p.HDel(ctx, idx, keys...)
			}
			return redis.NewCmd(ctx) // not a script: nothing to retry
		}
		args := []any{"v", voter.bytes(), kind, t.Unix(), hz, ttl.Milliseconds()}
		cmds[i] = callScript(ctx, p, eval, []string{r.voteKey(keys[i])}, args)
		return cmds[i]
	})
	return err
}

// Ping reports whether Redis answers (every master, on a cluster).
func (r *Redis) Ping(ctx context.Context) (err error) {
	start := time.Now()
	defer func() { r.observe("ping", start, err) }()
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return c.Ping(ctx).Err()
		})
	} else {
		err = r.client.Ping(ctx).Err()
	}
	if err != nil {
		return fmt.Errorf("ping redis: %w", classify(err))
	}
	if _, err := r.limits(ctx); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}

// Close closes the connections.
func (r *Redis) Close() error {
	if err := r.client.Close(); err != nil {
		return fmt.Errorf("close redis store: %w", err)
	}
	return nil
}

// forEachMaster runs fn on every master (the one server outside a
// cluster).
func (r *Redis) forEachMaster(ctx context.Context, fn func(ctx context.Context, c redis.UniversalClient) error) error {
	if cc, ok := r.client.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return fn(ctx, c) })
	}
	return fn(ctx, r.client)
}

// globEscape escapes Redis glob metacharacters.
func globEscape(s string) string {
	var b strings.Builder
	for _, c := range s {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// voteKeysMatching lists the ids of the signatures with votes, filtered by
// q's keys and key prefix (SCAN on every master when q names no exact keys).
func (r *Redis) voteKeysMatching(ctx context.Context, q VoteQuery) ([]string, error) {
	if len(q.Keys) > 0 {
		var ids []string
		for _, k := range uniq(q.Keys) {
			if strings.HasPrefix(k, q.KeyPrefix) {
				ids = append(ids, k)
			}
		}
		return ids, nil
	}
	pattern := globEscape(r.prefix) + "{*}:v:" + globEscape(q.KeyPrefix) + "*"
	var mu sync.Mutex
	var ids []string
	err := r.forEachMaster(ctx, func(ctx context.Context, c redis.UniversalClient) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for it.Next(ctx) {
			k := it.Val()
			i := strings.Index(k, "}:v:")
			if i < 0 {
				continue
			}
			mu.Lock()
			ids = append(ids, k[i+len("}:v:"):])
			mu.Unlock()
		}
		return it.Err()
	})
	return ids, err
}

func (q VoteQuery) voter(c *counting) (pseudonym, bool, error) {
	switch {
	case q.Voter != "" && q.VoterID != "":
		return 0, false, errors.New("vote query: set Voter or VoterID, not both")
	case q.Voter != "":
		return c.pseudonym(q.Voter), true, nil
	case q.VoterID != "":
		p, err := parsePseudonymHex(q.VoterID)
		return p, err == nil, err
	}
	return 0, false, nil
}

// ListVotes lists stored votes. By voter it reads the voter's index; by key
// or key prefix it scans the vote hashes (SCAN, on every master of a
// cluster), which is slow on a large database but not on the mail path.
func (r *Redis) ListVotes(ctx context.Context, q VoteQuery) (out []VoteEntry, err error) {
	start := time.Now()
	defer func() { r.observe("list_votes", start, err) }()
	voter, byVoter, err := q.voter(&r.c)
	if err != nil {
		return nil, err
	}
	horizon := r.c.Now().Unix() - int64(r.c.VoteHorizon.Seconds())
	add := func(id string, p pseudonym, v string) bool {
		if len(v) < 2 {
			return true
		}
		at, err := strconv.ParseInt(v[1:], 10, 64)
		if err != nil || at <= horizon {
			return true
		}
		e := VoteEntry{Key: id, VoterID: p.String(), Kind: voteFromCode(v[0]), Time: time.Unix(at, 0)}
		if byVoter {
			e.Voter = q.Voter
		}
		out = append(out, e)
		return q.Limit <= 0 || len(out) < q.Limit
	}
	if byVoter {
		idx, err := r.client.HGetAll(ctx, r.voterKey(voter)).Result()
		if err != nil {
			return nil, fmt.Errorf("list votes: %w", classify(err))
		}
		var ids []string
		for id := range idx {
			if strings.HasPrefix(id, q.KeyPrefix) && (len(q.Keys) == 0 || slices.Contains(q.Keys, id)) {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		// The vote hash is authoritative (the index may outlive a vote).
		pipe := r.client.Pipeline()
		cmds := make([]*redis.StringCmd, len(ids))
		for i, id := range ids {
			cmds[i] = pipe.HGet(ctx, r.voteKey(id), voter.bytes())
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("list votes: %w", classify(err))
		}
		for i, id := range ids {
			if v, err := cmds[i].Result(); err == nil && !add(id, voter, v) {
				break
			}
		}
		return out, nil
	}
	ids, err := r.voteKeysMatching(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list votes: %w", classify(err))
	}
	slices.Sort(ids)
	for _, id := range ids {
		all, err := r.client.HGetAll(ctx, r.voteKey(id)).Result()
		if err != nil {
			return nil, fmt.Errorf("list votes: %w", classify(err))
		}
		var fields []string
		for f := range all {
			if len(f) == pseudonymLen {
				fields = append(fields, f)
			}
		}
		slices.Sort(fields)
		for _, f := range fields {
			p, _ := pseudonymFromBytes(f)
			if !add(id, p, all[f]) {
				return out, nil
			}
		}
	}
	return out, nil
}

// RemoveVotes deletes the votes q selects; q must name a key, a key prefix
// or a voter.
func (r *Redis) RemoveVotes(ctx context.Context, q VoteQuery) (n int, err error) {
	start := time.Now()
	defer func() { r.observe("remove_votes", start, err) }()
	if q, err = q.forRemoval(); err != nil {
		return 0, err
	}
	entries, err := r.ListVotes(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("remove votes: %w", err)
	}
	// Group by voter: one retract per voter covers all their keys.
	byVoter := map[string][]string{}
	var order []string
	for _, e := range entries {
		if _, ok := byVoter[e.VoterID]; !ok {
			order = append(order, e.VoterID)
		}
		byVoter[e.VoterID] = append(byVoter[e.VoterID], e.Key)
	}
	now := r.c.Now()
	for _, id := range order {
		p, _ := parsePseudonymHex(id)
		if err := r.setVotes(ctx, p, byVoter[id], 0, now); err != nil {
			return n, fmt.Errorf("remove votes of %s: %w", id, err)
		}
		n += len(byVoter[id])
	}
	return n, nil
}

// classify wraps errors that mean "Redis cannot answer now" with
// ErrUnavailable; others are returned as they are.
func classify(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if isUnavailable(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) ||
		errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne interface{ Timeout() bool }
	if errors.As(err, &ne) {
		return true // net.Error: timeouts, refused and reset connections
	}
	if redis.IsLoadingError(err) || redis.IsReadOnlyError(err) || redis.IsClusterDownError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err) || redis.IsMaxClientsError(err) ||
		redis.IsOOMError(err) || redis.IsNoReplicasError(err) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"BUSY", "NOREPLICAS", "LOADING", "CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	// EOF, connection reset/refused and friends that are not net.Errors.
	for _, s := range []string{"EOF", "connection refused", "connection reset", "broken pipe", "i/o timeout", "no such host", "use of closed network connection"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// slotOf is the Redis Cluster slot of a hash tag: CRC16 (XMODEM) mod 16384.
func slotOf(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
