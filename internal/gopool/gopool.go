// Package gopool runs functions on long-lived goroutines.
//
// A goroutine starts with a small stack and grows it by copying, twice
// or three times over for a message's analysis, whose deepest calls
// (I-Match, the MIME walk) are far from where the milter's connection
// goroutine starts. The milter starts a goroutine a connection and an MTA
// opens a connection a message or a few, so most analyses paid for that
// growth (4–5 % of the milter process's CPU in its profile). The pool's
// goroutines keep their grown stacks from one message to the next.
//
// It imports nothing of bulkmilter.
package gopool

import (
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Pool runs functions on a fixed number of long-lived goroutines, all
// started at once (Start, or its first use) and never stopped, so that a process's count
// of goroutines does not grow with its load after its first message (a
// soak reads growth as a leak). When all of them are busy, Run runs the
// function on the caller's goroutine and Go on a new one: the pool never
// makes anyone wait.
type Pool struct {
	n     int
	start sync.Once
	work  chan *job // unbuffered: a send succeeds only into an idle worker
}

// New returns a pool of n goroutines (at least one).
func New(n int) *Pool {
	return &Pool{n: max(n, 1), work: make(chan *job)}
}

type job struct {
	f     func()
	done  chan any // the worker's recovered panic (a *Panic), or nil
	wg    *sync.WaitGroup
	async bool // from Go: nobody waits on done
}

// workers counts the goroutines every pool has started: they never end,
// so a count of a process's goroutines holds them beside the ones that
// come and go (the daemon exports it; its leak tests subtract it).
var workers atomic.Int64

// Goroutines returns how many goroutines all pools keep.
func Goroutines() int { return int(workers.Load()) }

var jobs = sync.Pool{New: func() any { return &job{done: make(chan any, 1)} }}

// Panic is a panic of a function the pool ran, raised again on the
// goroutine that waits for it, with the stack where it happened.
type Panic struct {
	Value any
	Stack []byte
}

func (p *Panic) Error() string { return fmt.Sprintf("%v\n\n%s", p.Value, p.Stack) }

// Unwrap returns the panic's value when it was an error.
func (p *Panic) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// Run runs f on one of the pool's goroutines and returns when it is done.
// A panic of f is raised again here as a *Panic.
func (p *Pool) Run(f func()) {
	j := jobs.Get().(*job)
	j.f = f
	if !p.hand(j) {
		j.f = nil
		jobs.Put(j)
		f()
		return
	}
	r := <-j.done
	j.f = nil
	jobs.Put(j)
	if r != nil {
		panic(r)
	}
}

// Go runs f on one of the pool's goroutines, or a new one when all are
// busy, and calls wg.Done when it returns (wg may be nil). f must not
// panic: a panic there would end the program, as on a goroutine of its
// own.
func (p *Pool) Go(wg *sync.WaitGroup, f func()) {
	if wg != nil {
		wg.Add(1)
	}
	j := jobs.Get().(*job)
	j.f, j.wg, j.async = f, wg, true
	if !p.hand(j) {
		j.f, j.wg, j.async = nil, nil, false
		jobs.Put(j)
		go func() {
			f()
			if wg != nil {
				wg.Done()
			}
		}()
	}
}

// Start starts the pool's goroutines, once: a daemon calls it as it sets
// up (detect.New, signature.NewSet), so that its count of goroutines is
// the same before its first message as after (a fault test and the soak
// read growth as a leak). Without it the first Run or Go starts them.
func (p *Pool) Start() {
	p.start.Do(func() {
		// Wait until every worker runs: a caller that never blocks
		// would otherwise find none waiting, and run everything itself,
		// for as long as the scheduler leaves the new goroutines queued.
		var ready sync.WaitGroup
		ready.Add(p.n)
		workers.Add(int64(p.n))
		for range p.n {
			go p.worker(&ready)
		}
		ready.Wait()
	})
}

// hand gives j to an idle worker; it reports false when every worker is
// busy (or, just after Start, none is waiting yet).
func (p *Pool) hand(j *job) bool {
	p.Start()
	select {
	case p.work <- j:
		return true
	default:
		return false
	}
}

func (p *Pool) worker(ready *sync.WaitGroup) {
	ready.Done()
	for j := range p.work {
		if j.async {
			wg, f := j.wg, j.f
			j.f, j.wg, j.async = nil, nil, false
			jobs.Put(j)
			f()
			if wg != nil {
				wg.Done()
			}
			continue
		}
		j.done <- run(j.f)
	}
}

func run(f func()) (r any) {
	defer func() {
		if v := recover(); v != nil {
			r = &Panic{Value: v, Stack: debug.Stack()}
		}
	}()
	f()
	return nil
}
