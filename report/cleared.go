package report

import (
	"fmt"
	"io"

	"github.com/tmend/tmend/store/model"
)

// clearedExcerpt is how much of a replaced content the text form shows; --json has all.
const clearedExcerpt = 300

// ClearedText writes what a session's compactions replaced by stubs (report --cleared):
// per content, the version written, the rule, the tool and call, the bytes before and
// after, and the text before and after.
func ClearedText(w io.Writer, sessionID string, cleared []model.Cleared) error {
	p := &errWriter{w: w}
	if len(cleared) == 0 {
		p.printf("session %s: tmend never compacted it (or its compacted versions were pruned)\n", Escape(sessionID))
		return p.err
	}
	for _, c := range cleared {
		p.printf("version %d  compact_%s  %s %s of %s", c.Version, c.Rule, c.Category, c.Target, Escape(c.Tool))
		if c.CallID != "" {
			p.printf(" (%s)", Escape(c.CallID))
		}
		p.printf(" at message %d: %d → %d bytes\n", c.MessageIndex, c.BytesBefore, c.BytesAfter)
		p.printf("  was: %s\n  now: %s\n", excerpt(c.Original), excerpt(c.Stub))
	}
	return p.err
}

func excerpt(s string) string {
	if len(s) <= clearedExcerpt {
		return Escape(s)
	}
	return Escape(s[:clearedExcerpt]) + fmt.Sprintf("… (%d bytes; --json has all)", len(s))
}
