package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/store"
)

func TestParseRedisURL(t *testing.T) {
	tests := []struct {
		url  string
		want string // fmt of the interesting fields
	}{
		{"redis://localhost", "addrs=[localhost:6379] cluster=false master= user= pass= db=0 tls=false"},
		{"redis://u:p%40ss@10.0.0.1:6380/3?timeout=250ms&pool_size=20&max_retries=-1",
			"addrs=[10.0.0.1:6380] cluster=false master= user=u pass=p@ss db=3 tls=false timeout=250ms pool=20 retries=-1"},
		{"redis://:secret@h/1", "addrs=[h:6379] cluster=false master= user= pass=secret db=1 tls=false"},
		{"rediss://h:6390?tls_ca_file=/etc/ca.pem&tls_server_name=redis.example", "addrs=[h:6390] cluster=false master= user= pass= db=0 tls=true ca=/etc/ca.pem sn=redis.example skip=false"},
		{"rediss://h?skip_verify=true", "addrs=[h:6379] cluster=false master= user= pass= db=0 tls=true ca= sn= skip=true"},
		{"unix:///run/redis/redis.sock?db=2", "addrs=[/run/redis/redis.sock] cluster=false master= user= pass= db=2 tls=false"},
		{"redis+cluster://u:p@n1:7000,n2:7001?addr=n3:7002", "addrs=[n1:7000 n2:7001 n3:7002] cluster=true master= user=u pass=p db=0 tls=false"},
		{"redis+cluster://n1:7000", "addrs=[n1:7000] cluster=true master= user= pass= db=0 tls=false"},
		{"redis://n1:7000,n2:7001", "addrs=[n1:7000 n2:7001] cluster=true master= user= pass= db=0 tls=false"},
		{"rediss+cluster://n1:7000,n2?timeout=2", "addrs=[n1:7000 n2:6379] cluster=true master= user= pass= db=0 tls=true ca= sn= skip=false timeout=2s"},
		{"redis+sentinel://u:p@s1,s2:26380/mymaster/4?sentinel_password=sp",
			"addrs=[s1:26379 s2:26380] cluster=false master=mymaster user=u pass=p db=4 tls=false spass=sp"},
		{"redis://h?namespace=prod:&first_sight_split=8&disable_identity=true&client_name=bm",
			"addrs=[h:6379] cluster=false master= user= pass= db=0 tls=false ns=prod: split=8 noid client=bm"},
		{"redis://[::1]:6379", "addrs=[[::1]:6379] cluster=false master= user= pass= db=0 tls=false"},
	}
	for _, tc := range tests {
		t.Run(tc.url, func(t *testing.T) {
			o, err := store.ParseRedisURL(tc.url)
			if err != nil {
				t.Fatalf("ParseRedisURL: %v", err)
			}
			got := fmt.Sprintf("addrs=%v cluster=%v master=%s user=%s pass=%s db=%d tls=%v",
				o.Addrs, o.Cluster, o.MasterName, o.Username, o.Password, o.DB, o.TLS != nil)
			if o.TLS != nil {
				got += fmt.Sprintf(" ca=%s sn=%s skip=%v", o.TLS.CAFile, o.TLS.ServerName, o.TLS.InsecureSkipVerify)
			}
			if o.Timeout != 0 {
				got += fmt.Sprintf(" timeout=%v", o.Timeout)
			}
			if o.PoolSize != 0 {
				got += fmt.Sprintf(" pool=%d", o.PoolSize)
			}
			if o.MaxRetries != 0 {
				got += fmt.Sprintf(" retries=%d", o.MaxRetries)
			}
			if o.SentinelPassword != "" {
				got += " spass=" + o.SentinelPassword
			}
			if o.Namespace != "" {
				got += fmt.Sprintf(" ns=%s split=%d", o.Namespace, o.FirstSightSplit)
			}
			if o.DisableIdentity {
				got += " noid"
			}
			if o.ClientName != "" {
				got += " client=" + o.ClientName
			}
			if got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestParseRedisURLErrors(t *testing.T) {
	tests := []struct {
		url, want string
	}{
		{"localhost:6379", "missing scheme"},
		{"http://h", `unknown scheme "http"`},
		{"redis+ring://h", `unknown topology "ring"`},
		{"unix+cluster:///s", "a Unix socket is one server"},
		{"redis://h?tls_ca_file=/x", "need a rediss:// scheme"},
		{"redis://h?read_timeout=1s", `unknown parameter "read_timeout"`},
		{"redis://h?timeout=soon", `timeout="soon"`},
		{"redis+cluster://a,b/2", "a cluster has no database number"},
		{"redis+sentinel://s1,s2", "needs /master"},
		{"redis://h/x", "invalid database number"},
		{"redis://u:hunter2@h?bogus=1", "redis://u:xxxxx@h?bogus=1"},
	}
	for _, tc := range tests {
		_, err := store.ParseRedisURL(tc.url)
		if err == nil {
			t.Errorf("%s: no error, want %q", tc.url, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %q, want it to contain %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: error leaks the password: %v", tc.url, err)
		}
	}
}

func FuzzParseRedisURL(f *testing.F) {
	for _, s := range []string{"redis://h", "rediss+cluster://u:p@a,b?addr=c:1", "redis+sentinel://s/m/1", "unix:///s?db=1", "redis://[::1]:1,[::2]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := store.ParseRedisURL(s)
		if err == nil && len(o.Addrs) == 0 {
			t.Errorf("%q: no error and no address", s)
		}
	})
}

// The URL constructor reaches a real server.
func TestNewRedisURL(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{Password: "s3cret"})
	ctx := context.Background()
	s, err := store.NewRedisURL(ctx, "redis://:s3cret@"+r.Addr()+"/2?timeout=500ms", store.Params{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	if _, err := s.Observe(ctx, store.Observation{Keys: []string{"k"}, Recipients: []string{"a@x"}, Time: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Do(ctx, "EVAL", "redis.call('SELECT', 2) return redis.call('DBSIZE')", 0); err != nil || n.(int64) == 0 {
		t.Errorf("db 2 after an observation through the URL's database: %v keys, %v", n, err)
	}
	// An ACL user in the URL.
	ra := testenv.StartRedis(t, testenv.RedisOptions{ACLUser: "milter", ACLPassword: "pw"})
	sa, err := store.NewRedisURL(ctx, "redis://milter:pw@"+ra.Addr(), store.Params{}, nil)
	if err != nil {
		t.Fatalf("ACL user: %v", err)
	}
	sa.Close()
	// Wrong password: a configuration error, not an outage.
	_, err = store.NewRedisURL(ctx, "redis://:wrong@"+r.Addr(), store.Params{}, nil)
	if err == nil {
		t.Fatal("wrong password: no error")
	}
	t.Logf("wrong password: %v", err)
}
