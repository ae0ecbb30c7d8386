package storetest

import (
	"strings"
	"sync"
)

// Logs collects what a logger, or a process's output, writes while a test reads it.
type Logs struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
