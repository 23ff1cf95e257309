package testenv

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that a program's output (exec.Cmd's Stdout
// and Stderr) or a server's goroutines write while the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
