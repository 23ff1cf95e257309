package daemon

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
	"github.com/bulkmilter/bulkmilter/lab/sample"
)

// BenchmarkRuntimeCheck is the daemon's check path as scan, eval and the
// milter's end of message run it: the raw message through the Builder,
// the pipeline and the embedded store behind the daemon's locked wrapper,
// on one in eight of the SpamAssassin sample. Instructions a message
// outside GC (docs/performance.md, "Fourteenth pass"):
//
//	GOGC=off valgrind --tool=cachegrind ./daemon.test -test.run '^$' \
//	    -test.bench RuntimeCheck -test.benchtime 2000x
func BenchmarkRuntimeCheck(b *testing.B) {
	c, err := sample.LoadCorpus(testenv.Corpora(b), sample.SpamAssassin, 8, 0)
	if err != nil {
		b.Fatal(err)
	}
	rt, _ := embeddedRuntime(b)
	rcpts := make([][]string, 256)
	for i := range rcpts {
		rcpts[i] = []string{fmt.Sprintf("user%d@example.test", i)}
	}
	at := time.Date(2026, 11, 29, 4, 0, 0, 0, time.UTC)
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if v := rt.Check(ctx, c.Messages[i%len(c.Messages)].Raw, rcpts[i%len(rcpts)], at); v.Err != nil {
			b.Fatal(v.Err)
		}
	}
}
