package queue

import (
	"log/slog"

	"github.com/rs/zerolog"
)

// RiverLogger is the logger River is given.
func (q *Queue) RiverLogger() *slog.Logger { return q.riverLog }

// Log is the queue's own logger.
func (q *Queue) Log() *zerolog.Logger { return &q.log }
