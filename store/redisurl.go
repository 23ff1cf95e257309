package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ParseRedisURL turns a Redis URL into RedisOptions. The forms are
// go-redis's (ParseURL, ParseClusterURL, ParseFailoverURL) plus a scheme
// suffix that names the topology:
//
//	redis://[user:password@]host[:port][/db]           one server (port 6379)
//	rediss://…                                         the same over TLS
//	unix://[user:password@]/path/redis.sock[?db=N]     one server on a Unix socket
//	redis+cluster://[user:password@]host:port[,host:port…]
//	rediss+cluster://…                                 Cluster (seed nodes), TLS
//	redis://host:port,host:port…                       also Cluster (more than one host)
//	redis+sentinel://[user:password@]host:port[,host:port…]/master[/db]
//	rediss+sentinel://…                                Sentinel (sentinel addresses), TLS
//
// The user and password are the data nodes' (ACL user, or a password
// alone). Further hosts may also be given as addr=host:port parameters.
// Query parameters:
//
//	db=N                   database (not on Cluster)
//	timeout=D              per-call timeout (Go duration, or seconds), default 1s
//	dial_timeout=D         connect timeout, default the call timeout
//	max_retries=N          retries within the call deadline (-1: none), default 1
//	pool_size=N            connections per node
//	client_name=S          CLIENT SETNAME
//	protocol=2|3           RESP version
//	disable_identity=true  skip CLIENT SETINFO
//	namespace=S            key prefix before "bm2:"
//	first_sight_split=N    first-sighting hashes per tag and bucket
//	sentinel_username=S, sentinel_password=S   the sentinels' own credentials
//	tls_ca_file=F, tls_cert_file=F, tls_key_file=F, tls_server_name=S,
//	skip_verify=true       TLS settings (rediss only; verification is on by default)
//
// Unknown parameters are errors. Counting parameters (window, buckets,
// secret) are not part of the URL: they come from the configuration.
func ParseRedisURL(raw string) (RedisOptions, error) {
	o, err := parseRedisURL(raw)
	if err != nil {
		return RedisOptions{}, fmt.Errorf("redis url %s: %w", redactURL(raw), err)
	}
	return o, nil
}

// NewRedisURL is NewRedis with options from ParseRedisURL: what the
// daemon's -redis flag calls.
func NewRedisURL(ctx context.Context, rawURL string, p Params, obs Observer) (*Redis, error) {
	o, err := ParseRedisURL(rawURL)
	if err != nil {
		return nil, err
	}
	o.Params = p
	o.Observer = obs
	return NewRedis(ctx, o)
}

// redactURL hides the password of a URL for error messages.
func redactURL(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return "(unparsable)"
	}
	rest := raw[i+3:]
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		user := rest[:at]
		if c := strings.Index(user, ":"); c >= 0 {
			user = user[:c] + ":xxxxx"
		}
		return raw[:i+3] + user + rest[at:]
	}
	return raw
}

func parseRedisURL(raw string) (RedisOptions, error) {
	var o RedisOptions
	i := strings.Index(raw, "://")
	if i < 0 {
		return o, errors.New("missing scheme (redis://, rediss://, unix://, redis+cluster://, redis+sentinel://)")
	}
	scheme := strings.ToLower(raw[:i])
	rest := raw[i+3:]
	base, topo, _ := strings.Cut(scheme, "+")
	switch base {
	case "redis", "rediss":
	case "unix":
		if topo != "" {
			return o, fmt.Errorf("scheme %s: a Unix socket is one server", scheme)
		}
	default:
		return o, fmt.Errorf("unknown scheme %q", scheme)
	}
	if topo != "" && topo != "cluster" && topo != "sentinel" {
		return o, fmt.Errorf("unknown topology %q in scheme %s (want +cluster or +sentinel)", topo, scheme)
	}
	tlsOn := base == "rediss"

	// Split off the query and our own parameters; what remains goes to
	// go-redis's parser, which rejects anything it does not know.
	query := ""
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		rest, query = rest[:q], rest[q+1:]
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return o, fmt.Errorf("query: %w", err)
	}
	take := func(name string) (string, bool) {
		v, ok := q[name]
		if !ok {
			return "", false
		}
		delete(q, name)
		return v[len(v)-1], true
	}
	var errs []error
	duration := func(name string) time.Duration {
		s, ok := take(name)
		if !ok {
			return 0
		}
		if n, err := strconv.Atoi(s); err == nil {
			return time.Duration(n) * time.Second
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive duration", name, s))
		}
		return d
	}
	boolean := func(name string) bool {
		s, ok := take(name)
		if !ok {
			return false
		}
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want true or false", name, s))
		}
		return b
	}
	integer := func(name string) int {
		s, ok := take(name)
		if !ok {
			return 0
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: want a number", name, s))
		}
		return n
	}
	o.Timeout = duration("timeout")
	o.DisableIdentity = boolean("disable_identity")
	o.Namespace, _ = take("namespace")
	o.FirstSightSplit = integer("first_sight_split")
	o.SentinelUsername, _ = take("sentinel_username")
	o.SentinelPassword, _ = take("sentinel_password")
	t := &TLSOptions{}
	t.CAFile, _ = take("tls_ca_file")
	t.CertFile, _ = take("tls_cert_file")
	t.KeyFile, _ = take("tls_key_file")
	t.ServerName, _ = take("tls_server_name")
	t.InsecureSkipVerify = boolean("skip_verify")
	if tlsOn {
		o.TLS = t
	} else if *t != (TLSOptions{}) {
		errs = append(errs, errors.New("tls_* and skip_verify parameters need a rediss:// scheme"))
	}
	extra := q["addr"]
	delete(q, "addr")
	for name := range q {
		switch name {
		case "db", "pool_size", "dial_timeout", "max_retries", "client_name", "protocol":
		default:
			errs = append(errs, fmt.Errorf("unknown parameter %q", name))
		}
	}
	if len(errs) > 0 {
		return RedisOptions{}, errors.Join(errs...)
	}

	if base == "unix" {
		if err := o.parseServer("unix://" + rest + "?" + q.Encode()); err != nil {
			return RedisOptions{}, err
		}
		return o, nil
	}

	// Authority: [userinfo@]host[,host…]; then the path.
	auth, path := rest, ""
	if s := strings.IndexByte(rest, '/'); s >= 0 {
		auth, path = rest[:s], rest[s:]
	}
	userinfo, hostlist := "", auth
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		userinfo, hostlist = auth[:at+1], auth[at+1:]
	}
	var hosts []string
	for _, h := range strings.Split(hostlist, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hosts = append(hosts, h)
		}
	}
	if len(hosts) == 0 {
		return RedisOptions{}, errors.New("no host")
	}
	hosts = append(hosts, extra...)
	gr := "redis"
	if tlsOn {
		gr = "rediss"
	}
	if topo == "" && len(hosts) > 1 {
		topo = "cluster" // go-redis's UniversalClient rule: several addresses are a cluster
	}
	switch topo {
	case "":
		if err := o.parseServer(gr + "://" + userinfo + hosts[0] + path + "?" + q.Encode()); err != nil {
			return RedisOptions{}, err
		}
	case "cluster":
		if path != "" && path != "/" {
			return RedisOptions{}, fmt.Errorf("path %q: a cluster has no database number", path)
		}
		for _, h := range hosts[1:] {
			q.Add("addr", withPort(h, "6379"))
		}
		co, err := redis.ParseClusterURL(gr + "://" + userinfo + hosts[0] + "?" + q.Encode())
		if err != nil {
			return RedisOptions{}, err
		}
		o.Addrs, o.Cluster = co.Addrs, true
		o.Username, o.Password = co.Username, co.Password
		o.PoolSize, o.DialTimeout, o.MaxRetries = co.PoolSize, co.DialTimeout, co.MaxRetries
		o.ClientName, o.Protocol = co.ClientName, co.Protocol
	case "sentinel":
		segs := strings.FieldsFunc(path, func(r rune) bool { return r == '/' })
		if len(segs) == 0 || len(segs) > 2 {
			return RedisOptions{}, errors.New("sentinel URL needs /master[/db] after the hosts")
		}
		master, err := url.PathUnescape(segs[0])
		if err != nil {
			return RedisOptions{}, fmt.Errorf("master name: %w", err)
		}
		q.Set("master_name", master)
		if len(segs) == 2 {
			q.Set("db", segs[1])
		}
		if userinfo != "" {
			u, err := url.Parse("redis://" + userinfo + "h")
			if err != nil {
				return RedisOptions{}, fmt.Errorf("user info: %w", err)
			}
			q.Set("username", u.User.Username())
			p, _ := u.User.Password()
			q.Set("password", p)
		}
		for _, h := range hosts[1:] {
			q.Add("addr", withPort(h, "26379"))
		}
		fo, err := redis.ParseFailoverURL(gr + "://" + withPort(hosts[0], "26379") + "?" + q.Encode())
		if err != nil {
			return RedisOptions{}, err
		}
		o.Addrs, o.MasterName = fo.SentinelAddrs, fo.MasterName
		o.Username, o.Password, o.DB = fo.Username, fo.Password, fo.DB
		o.PoolSize, o.DialTimeout, o.MaxRetries = fo.PoolSize, fo.DialTimeout, fo.MaxRetries
		o.ClientName, o.Protocol = fo.ClientName, fo.Protocol
	}
	return o, nil
}

// parseServer reads the URL of one server (TCP or unix socket) with
// go-redis's own parser into o.
func (o *RedisOptions) parseServer(u string) error {
	ro, err := redis.ParseURL(u)
	if err != nil {
		return err
	}
	o.Addrs = []string{ro.Addr}
	o.Username, o.Password, o.DB = ro.Username, ro.Password, ro.DB
	o.PoolSize, o.DialTimeout, o.MaxRetries = ro.PoolSize, ro.DialTimeout, ro.MaxRetries
	o.ClientName, o.Protocol = ro.ClientName, ro.Protocol
	return nil
}

// withPort adds the default port to a host without one.
func withPort(h, port string) string {
	if strings.HasPrefix(h, "[") {
		if strings.Contains(h, "]:") {
			return h
		}
		return h + ":" + port
	}
	if strings.Count(h, ":") == 1 {
		return h
	}
	return h + ":" + port
}
