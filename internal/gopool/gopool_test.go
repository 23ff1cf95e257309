package gopool

import (
	"bytes"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// goid is the calling goroutine's id, from its stack trace's first line.
func goid() uint64 {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	f := bytes.Fields(b[:n])
	id, _ := strconv.ParseUint(string(f[1]), 10, 64)
	return id
}

// One caller after another: the functions run on the pool's goroutines,
// reused (a caller may come back before the worker that served it waits
// again, so a second one may start, never more than the pool's size), not
// on the caller's, and Run returns after each.
func TestRunReusesGoroutines(t *testing.T) {
	p := New(4)
	caller := goid()
	ids := map[uint64]bool{}
	for i := range 200 {
		var id uint64
		ran := false
		p.Run(func() { id, ran = goid(), true })
		if !ran {
			t.Fatalf("call %d: Run returned before its function ran", i)
		}
		ids[id] = true
	}
	if len(ids) > 4 || ids[caller] {
		t.Errorf("200 calls one after another ran on goroutines %v (caller %d), want at most the pool's 4", ids, caller)
	}
}

// Callers at once: each function runs exactly once, on at most the pool's
// goroutines or its caller's (when every worker was busy).
func TestRunConcurrentBounded(t *testing.T) {
	const workers, callers, calls = 2, 8, 300
	p := New(workers)
	var ran atomic.Int64
	var mu sync.Mutex
	pooled := map[uint64]bool{}
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			me := goid()
			for range calls {
				p.Run(func() {
					ran.Add(1)
					if id := goid(); id != me {
						mu.Lock()
						pooled[id] = true
						mu.Unlock()
					}
				})
			}
		})
	}
	wg.Wait()
	if got := ran.Load(); got != callers*calls {
		t.Errorf("%d functions ran, want %d", got, callers*calls)
	}
	if len(pooled) > workers {
		t.Errorf("functions ran on %d pool goroutines, want at most %d", len(pooled), workers)
	}
}

// A panic comes back to Run's caller with its value and the stack where it
// happened, and the pool goes on.
func TestRunPanic(t *testing.T) {
	p := New(1)
	boom := errors.New("boom")
	func() {
		defer func() {
			r := recover()
			pe, ok := r.(*Panic)
			if !ok {
				t.Fatalf("recovered %T %v, want a *Panic", r, r)
			}
			if !errors.Is(pe, boom) || !strings.Contains(string(pe.Stack), "panicker") {
				t.Errorf("panic %v, stack %q: want boom and the function that panicked", pe.Value, pe.Stack)
			}
		}()
		p.Run(panicker(boom))
	}()
	ran := false
	p.Run(func() { ran = true })
	if !ran {
		t.Error("the pool stopped after a panic")
	}
}

func panicker(err error) func() {
	return func() { panic(err) }
}

// Go runs every function once and wg waits for them all, on new
// goroutines when the pool's are busy.
func TestGo(t *testing.T) {
	p := New(2)
	var ran atomic.Int64
	var wg sync.WaitGroup
	block := make(chan struct{})
	for range 2 {
		p.Go(&wg, func() { <-block; ran.Add(1) })
	}
	for range 50 { // the pool is busy: new goroutines
		p.Go(&wg, func() { ran.Add(1) })
	}
	close(block)
	wg.Wait()
	if got := ran.Load(); got != 52 {
		t.Errorf("%d functions ran, want 52", got)
	}
	for range 100 {
		p.Go(&wg, func() { ran.Add(1) })
		wg.Wait()
	}
	if got := ran.Load(); got != 152 {
		t.Errorf("%d functions ran, want 152", got)
	}
}

// The pool's goroutines all start at its first use: the process's count
// grows by the pool's size then, and not with the load after it.
func TestGoroutinesFixedAfterFirstUse(t *testing.T) {
	const size = 3
	p := New(size)
	n0 := runtime.NumGoroutine()
	p.Run(func() {})
	if got := runtime.NumGoroutine(); got != n0+size {
		t.Fatalf("after the first use: %d goroutines, want %d + %d", got, n0, size)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 200 {
				p.Run(func() {})
			}
		})
	}
	var side sync.WaitGroup
	for range 100 {
		p.Go(&side, func() {})
	}
	wg.Wait()
	side.Wait()
	// The callers and Go's extra goroutines end after Done; wait for them
	// (bounded: a pool that grew never gets there).
	deadline := time.Now().Add(time.Minute)
	for runtime.NumGoroutine() > n0+size && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got != n0+size {
		t.Errorf("after the load: %d goroutines, want %d + %d", got, n0, size)
	}
}

// BenchmarkRun is the pool's own cost: a hand-over and back.
func BenchmarkRun(b *testing.B) {
	p := New(1)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		p.Run(func() { n++ })
	}
}
