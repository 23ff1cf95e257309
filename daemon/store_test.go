package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/store"
)

// The embedded store is never timed out: a deadline that passed before the
// call (a host too busy to schedule it) still gets the store's verdict and
// records the vote, where it used to be "store unavailable".
func TestEmbeddedStoreIgnoresDeadline(t *testing.T) {
	c := config.Default()
	c.DataDir = t.TempDir()
	c.SecretKeyFile = filepath.Join(c.DataDir, "secret.key")
	rt, err := NewRuntime(&c, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	raw := []byte("Subject: the spring planting guide\r\n\r\n" +
		"apple river mountain letter window garden silver motor planet history market winter doctor village camera bridge\r\n")
	var keys []string
	for i := range 3 {
		v := rt.Check(expired, raw, []string{"r" + string(rune('a'+i)) + "@example.test"}, time.Time{})
		if v.Err != nil || v.Unsigned {
			t.Fatalf("copy %d: err %v, unsigned %v", i, v.Err, v.Unsigned)
		}
		if got := v.Volumes[v.Analysis.Keys[0].Family]; got != int64(i+1) {
			t.Errorf("copy %d: volume %d, want %d", i, got, i+1)
		}
		keys = v.IDs
	}
	if err := rt.Store().RecordVote(expired, store.Vote{Keys: keys, Voter: "ra@example.test", Kind: store.VoteNotBulk}); err != nil {
		t.Errorf("vote with an expired deadline: %v", err)
	}
}
