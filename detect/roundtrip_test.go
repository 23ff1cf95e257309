package detect

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-message/textproto"
	"github.com/redis/go-redis/v9"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/redisinfo"
	"github.com/bulkmilter/bulkmilter/store"
)

// tripHook counts what the client sends: a pipeline or a lone command is
// one round trip.
type tripHook struct{ trips, dials atomic.Int64 }

func (h *tripHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		h.dials.Add(1)
		return next(ctx, network, addr)
	}
}

func (h *tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (h *tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		return next(ctx, cmds)
	}
}

// Every message costs exactly one Redis round trip, counted by the client
// and by the server, including a message whose recipient voted on its keys
// (her votes per key come back in the same answer).
func TestOneRedisRoundTripPerMessage(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{})
	ctx := context.Background()
	st, err := store.NewRedis(ctx, store.RedisOptions{Addrs: []string{r.Addr()}, Timeout: 5 * time.Second, PoolSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := newFixtureWith(t, st)
	hook := &tripHook{}
	st.Client().AddHook(hook)

	const ann = "ann@example.test"
	f.vote(ann, store.VoteNotBulk, f.ids(func() *Message { return newsletter("garden") }))
	// Warm up: the script is loaded and the connection open.
	for range 2 {
		f.check(newsletter("warm-up", "w@example.test"))
	}
	f.check(newsletter("garden", recipients("r", 12)...))

	tests := []struct {
		name  string
		msg   *Message
		check func(v Verdict) bool
	}{
		{"no vote", newsletter("garden", "bob@example.test"), func(v Verdict) bool { return v.Bulk && len(v.NotBulkFor) == 0 }},
		{"her own vote", newsletter("garden", ann, "carl@example.test"), func(v Verdict) bool {
			return v.Bulk && slices.Equal(v.NotBulkFor, []string{ann})
		}},
		{"only her", newsletter("garden", ann), func(v Verdict) bool { return !v.Bulk && slices.Equal(v.NotBulkFor, []string{ann}) }},
		{"a message she did not vote on", tenants(ann, "dan@example.test"), func(v Verdict) bool { return !v.Bulk && len(v.NotBulkFor) == 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, err := redisinfo.Read(ctx, r.Client())
			if err != nil {
				t.Fatal(err)
			}
			trips, dials := hook.trips.Load(), hook.dials.Load()
			v := f.e.Check(ctx, tc.msg)
			after, err := redisinfo.Read(ctx, r.Client())
			if err != nil {
				t.Fatal(err)
			}
			d := after.Sub(before)
			if v.Err != nil || !tc.check(v) {
				t.Fatalf("verdict err=%v bulk=%v notBulkFor=%v", v.Err, v.Bulk, v.NotBulkFor)
			}
			scripts := d.Commands["evalsha"].Calls + d.Commands["eval"].Calls
			if got := hook.trips.Load() - trips; got != 1 {
				t.Errorf("client round trips: got %d, want 1", got)
			}
			if got := hook.dials.Load() - dials; got != 0 {
				t.Errorf("connections opened: %d, want 0", got)
			}
			if d.Writes != 1 || scripts != 1 {
				t.Errorf("server: %d replies written, %d script calls (%v); want 1 and 1", d.Writes, scripts, d.Commands)
			}
		})
	}
}

// tenants is a message unlike the newsletters.
func tenants(rcpts ...string) *Message {
	var h textproto.Header
	h.Set("Subject", "Minutes of the tenants meeting")
	return &Message{Header: h, Recipients: rcpts, Body: strings.NewReader(`Dear neighbours,
the tenants association met on Tuesday evening in the community room. We discussed
the broken elevator in the north staircase, the new recycling bins in the courtyard,
and the proposal to plant trees along the parking lot. The landlord promised to repair
the elevator before the end of the month. Volunteers for the spring cleaning day should
write to the secretary. The next meeting takes place on the first Tuesday of May.
`)}
}
