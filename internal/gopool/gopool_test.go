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
// reused, never more of them than the pool's size, and Run returns after
// each. (A call finding no worker waiting, just after Start or when the
// worker that served the last one has not come back yet, runs on the
// caller's goroutine.)
func TestRunReusesGoroutines(t *testing.T) {
	p := New(4)
	caller := goid()
	ids := map[uint64]bool{}
	pooled := 0
	for i := range 200 {
		var id uint64
		ran := false
		p.Run(func() { id, ran = goid(), true })
		if !ran {
			t.Fatalf("call %d: Run returned before its function ran", i)
		}
		if id != caller {
			ids[id] = true
			pooled++
		}
	}
	if len(ids) > 4 || pooled == 0 {
		t.Errorf("200 calls one after another: %d on the pool's goroutines %v, want some, on at most 4", pooled, ids)
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

// A panic comes back to Run's caller, from a pool goroutine as a *Panic
// with its value and the stack where it happened (run inline, as itself),
// and the pool goes on.
func TestRunPanic(t *testing.T) {
	p := New(1)
	boom := errors.New("boom")
	wrapped := 0
	for range 100 {
		func() {
			defer func() {
				switch r := recover().(type) {
				case *Panic:
					wrapped++
					if !errors.Is(r, boom) || !strings.Contains(string(r.Stack), "panicker") {
						t.Errorf("panic %v, stack %q: want boom and the function that panicked", r.Value, r.Stack)
					}
				case error:
					if r != boom {
						t.Errorf("recovered %v, want boom", r)
					}
				default:
					t.Errorf("recovered %T %v, want a *Panic or boom", r, r)
				}
			}()
			p.Run(panicker(boom))
		}()
	}
	if wrapped == 0 {
		t.Error("no panic of 100 came from the pool's goroutine")
	}
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
	// Without a WaitGroup (the milter's sessions), on the pool's
	// goroutines and on new ones; a Run after them still waits for its
	// own function only.
	done := make(chan struct{}, 60)
	block = make(chan struct{})
	for range 60 {
		p.Go(nil, func() { <-block; done <- struct{}{} })
	}
	close(block)
	for range 60 {
		<-done
	}
	var x int
	p.Run(func() { x = 1 })
	if x != 1 {
		t.Error("Run after Go(nil, …) did not run its function")
	}
}

// The pool's goroutines all start at once, by Start (twice is once): the
// process's count of goroutines does not grow with the load after it.
func TestGoroutinesFixedAfterFirstUse(t *testing.T) {
	const size = 3
	p := New(size)
	g0 := Goroutines()
	p.Start()
	p.Start()
	if got := Goroutines(); got != g0+size {
		t.Errorf("Goroutines() %d after Start twice, want %d + %d", got, g0, size)
	}
	p.Run(func() {})
	// Other tests' goroutines may still be ending: the count may fall,
	// it must not grow.
	n1 := runtime.NumGoroutine()
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
	for runtime.NumGoroutine() > n1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.NumGoroutine(); got > n1 {
		t.Errorf("after the load: %d goroutines, %d after Start and a first use", got, n1)
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
