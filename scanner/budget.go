package scanner

import (
	"context"
	"sync"
)

// budget counts the bytes of session content read and not yet handled. One reader
// waits for room and takes it; workers release what they held.
type budget struct {
	mu      sync.Mutex
	limit   int
	used    int
	changed chan struct{} // closed, and replaced, whenever used goes down
}

func newBudget(limit int) *budget {
	return &budget{limit: limit, changed: make(chan struct{})}
}

// room is how many bytes fit now; the whole limit when nothing is in flight.
func (b *budget) room() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.limit-b.used, 0)
}

// take counts n more bytes as in flight (n may be negative), without waiting.
func (b *budget) take(n int) {
	if n < 0 {
		b.release(-n)
		return
	}
	b.mu.Lock()
	b.used += n
	b.mu.Unlock()
}

func (b *budget) release(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// wait returns once n more bytes fit, or nothing is in flight (so that something
// larger than the whole budget goes alone), or when ctx ends or stop closes.
func (b *budget) wait(ctx context.Context, stop <-chan struct{}, n int) error {
	for {
		b.mu.Lock()
		ok := b.used == 0 || b.used+n <= b.limit
		changed := b.changed
		b.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-stop:
			return errStopped
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
