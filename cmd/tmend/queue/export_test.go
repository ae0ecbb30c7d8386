package queue

import (
	"log/slog"
	"time"

	"github.com/rs/zerolog"
)

// RiverLogger is the logger River is given.
func (q *Queue) RiverLogger() *slog.Logger { return q.riverLog }

// Log is the queue's own logger.
func (q *Queue) Log() *zerolog.Logger { return &q.log }

// SetPoll sets how often Wait reads a run.
func (q *Queue) SetPoll(d time.Duration) { q.poll = d }
