package report

import (
	"io"

	"github.com/tmend/tmend/store/model"
)

// RollbackText writes a line per session of a rollback (restored, would restore,
// refused with the reason, or failed with the error), then the totals and the run that
// recorded the rollback.
func RollbackText(w io.Writer, out model.RollbackOutcome) error {
	p := &errWriter{w: w}
	verb := "restored"
	if out.DryRun {
		verb = "would restore"
	}
	for _, r := range out.Sessions {
		id := Escape(r.SessionID)
		switch r.Status {
		case model.RollbackWouldRestore:
			p.printf("%s: %s version %d (replacing version %d)\n", id, verb, r.To, r.From)
		case model.RollbackRestored:
			p.printf("%s: restored version %d as version %d", id, r.To, r.Written)
			if r.Preserved > 0 {
				p.printf(" (its changed content kept as version %d)", r.Preserved)
			}
			p.println()
		case model.RollbackFailed:
			p.printf("%s: failed: %s\n", id, Escape(r.Error))
		default:
			p.printf("%s: refused: %s\n", id, Escape(r.Reason))
		}
	}
	p.printf("%s %d, refused %d, failed %d", verb, out.Restored, out.Refused, out.Failed)
	if out.RunID != 0 {
		p.printf(" (rollback run %d)", out.RunID)
	}
	p.println()
	return p.err
}
