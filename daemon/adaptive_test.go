package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/config"
)

// TestAdaptiveSiteSizes replays the default configuration at a 50-user site
// and at synthetic 100,000-user sites (all users active, or only a quarter
// of them in the window): the small site comes down to the floor, the
// large ones keep today's threshold. Message time, so a day passes at once.
func TestAdaptiveSiteSizes(t *testing.T) {
	body := `The club ride leaves the station car park at eight on Saturday morning and
follows the river to the old bridge, then climbs through the forest to the
village with the bakery. Bring a spare inner tube, a pump and enough water for
three hours; the pace stays conversational and nobody is left behind on the
hills. In case of heavy rain the ride is cancelled and announced by telephone.
`
	def := config.Default()
	for _, c := range []struct {
		name   string
		users  int // distinct recipients active the day before and on the day
		tagged int // of 12 copies, each to another user
	}{
		{"50 users", 50, 12 - def.Policy.Adaptive.Floor + 1},
		{"100,000 users", 100_000, 12 - def.Policy.Threshold + 1},
		{"100,000 users, a quarter active", 25_000, 12 - def.Policy.Threshold + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Policy.Adaptive.Enabled = true // the shipped values, switched on
			rt := newTempRuntime(t, &cfg)
			ctx := context.Background()
			t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
			// The site's ordinary mail: each user gets a short note a day
			// for two days (a hundred recipients per message keeps this fast).
			for day := range 2 {
				for i := 0; i < c.users; i += 100 {
					var rcpts []string
					for j := i; j < min(i+100, c.users); j++ {
						rcpts = append(rcpts, fmt.Sprintf("user%d@site.example", j))
					}
					raw := fmt.Sprintf("Subject: note %d\r\n\r\nSee you at %d.\r\n", i, i)
					rt.Check(ctx, []byte(raw), rcpts, t0.Add(time.Duration(day)*24*time.Hour))
				}
			}
			tagged, th := 0, 0
			for i := range 12 {
				v := rt.Check(ctx, []byte("Subject: Saturday ride\r\n\r\n"+strings.ReplaceAll(body, "\n", "\r\n")),
					[]string{fmt.Sprintf("user%d@site.example", i)}, t0.Add(25*time.Hour+time.Duration(i)*time.Minute))
				if v.Err != nil || v.Unsigned {
					t.Fatalf("copy %d: %+v", i, v)
				}
				if v.Bulk {
					tagged++
				}
				th = v.Threshold
			}
			if tagged != c.tagged {
				t.Errorf("%d of 12 copies tagged at threshold %d, want %d", tagged, th, c.tagged)
			}
		})
	}
}

// TestAdaptiveNetworksDefault replays the default configuration (the
// adaptive threshold off, policy.adaptive.networks on) at a 50-user site:
// a campaign to two users from a new /24 each copy is bulk at the floor by
// its networks, the same copies to a user each from one network (a list
// server) only at the ceiling; with networks off, both at the ceiling.
func TestAdaptiveNetworksDefault(t *testing.T) {
	body := "Subject: Saturday ride\r\n\r\n" + strings.Repeat("The club ride leaves the station car park at eight on Saturday morning and "+
		"follows the river to the old bridge, then climbs through the forest to the village with the bakery. ", 2)
	def := config.Default()
	for _, c := range []struct {
		name     string
		networks bool
		users    int // the copies go to user i%users
		nets     int // from network i%nets
		first    int // the first copy tagged
	}{
		{"many networks, two users", true, 2, 12, def.Policy.Adaptive.Floor},
		{"one network, a user each", true, 12, 1, def.Policy.Threshold},
		{"many networks, networks off", false, 2, 12, def.Policy.Threshold},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Policy.Adaptive.Networks = c.networks
			rt := newTempRuntime(t, &cfg)
			ctx := context.Background()
			t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
			for day := range 2 { // the site's 50 users, a day before and on the day
				var rcpts []string
				for j := range 50 {
					rcpts = append(rcpts, fmt.Sprintf("user%d@site.example", j))
				}
				rt.Check(ctx, []byte("Subject: note\r\n\r\nSee you.\r\n"), rcpts, t0.Add(time.Duration(day)*24*time.Hour))
			}
			first := 0
			for i := range 12 {
				m := rt.Message([]byte(body), []string{fmt.Sprintf("user%d@site.example", i%c.users)}, t0.Add(25*time.Hour+time.Duration(i)*time.Minute))
				m.Client = netip.AddrFrom4([4]byte{203, 0, byte(i % c.nets), 9})
				v := rt.Engine().Check(ctx, m)
				if v.Err != nil || v.Unsigned {
					t.Fatalf("copy %d: %+v", i, v)
				}
				if v.Bulk && first == 0 {
					first = i + 1
				}
			}
			if first != c.first {
				t.Errorf("first copy tagged: %d, want %d", first, c.first)
			}
		})
	}
}

// newTempRuntime is a runtime of cfg with its data and secret key in a
// temporary directory, closed when the test ends.
func newTempRuntime(t *testing.T, cfg *config.Config) *Runtime {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.SecretKeyFile = filepath.Join(cfg.DataDir, "secret.key")
	rt, err := NewRuntime(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}
