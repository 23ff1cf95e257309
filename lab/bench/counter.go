package bench

import (
	"maps"
	"sync"
)

// counter counts strings concurrently.
type counter struct {
	mu sync.Mutex
	m  map[string]int64
}

func newCounter() *counter { return &counter{m: map[string]int64{}} }

func (c *counter) add(k string) {
	c.mu.Lock()
	c.m[k]++
	c.mu.Unlock()
}

func (c *counter) snapshot() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

func (c *counter) get(k string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}
