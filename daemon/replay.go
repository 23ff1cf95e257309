package daemon

import (
	"context"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
)

// Replaying raw messages (scan, the lab's eval and bench): the runtime's
// pipeline fed the way the milter session feeds it, through a
// detect.Builder with the runtime's limits and header names, fields and
// body as detect.Split cuts them (Postfix's split), so offline and online
// run the same bytes through the same code.

// Message takes a raw message in as an MTA hands it over, arriving at at
// (zero: now).
func (rt *Runtime) Message(raw []byte, rcpts []string, at time.Time) *detect.Message {
	return rt.fill(rt.newBuilder(), raw, rcpts, at)
}

func (rt *Runtime) newBuilder() *detect.Builder {
	b := detect.NewBuilder(rt.state.Limits, rt.state.Actions.Header, rt.state.Actions.FeedbackHeader)
	b.LevelHeader, b.AuthservID = rt.state.Actions.LevelHeader, rt.state.Actions.AuthservID
	return b
}

// fill builds the message in b.
func (rt *Runtime) fill(b *detect.Builder, raw []byte, rcpts []string, at time.Time) *detect.Message {
	b.ReadRaw(raw)
	for _, r := range rcpts {
		b.Recipient(r)
	}
	m := b.Message()
	m.Time = at
	return m
}

// Check runs the whole pipeline for one raw message arriving at at (zero:
// now). Its builder serves the next Check once the verdict is in, as a
// milter session's serves its next message: a builder a message grew a
// body buffer, a field list and its slices again every time (about a
// third of BenchmarkRuntimeCheck's bytes; docs/performance.md, "Sixteenth
// pass"). Nothing of the verdict points into the builder: the analysis
// copies what it keeps, and the header arena is not reused.
func (rt *Runtime) Check(ctx context.Context, raw []byte, rcpts []string, at time.Time) detect.Verdict {
	var b *detect.Builder
	select {
	case b = <-rt.builders:
	default:
		b = rt.newBuilder()
	}
	v := rt.engine.Check(ctx, rt.fill(b, raw, rcpts, at))
	b.Reset()
	select {
	case rt.builders <- b:
	default:
	}
	return v
}

// Analyze runs the pure part of the pipeline for one raw message.
func (rt *Runtime) Analyze(raw []byte, rcpts []string) *detect.Analysis {
	return rt.engine.Analyze(rt.Message(raw, rcpts, time.Time{}))
}
