package compact

import (
	"bytes"
	"fmt"

	"github.com/tmend/tmend/repair"
)

// verify checks the compacted transcript out against msgs before it may be written,
// and says what failed ("" when all holds): the engine reads the same messages, parts,
// call and result ids, tool names and error flags at the same positions; check finds no
// issue it did not find before; every byte from the boundary on is the same; out is
// smaller.
func verify(msgs, out []byte, before repair.Outline, t *transcript, v repair.Report) string {
	if len(out) >= len(msgs) {
		return "output_not_smaller"
	}
	after, err := repair.Inspect(out, repair.Options{Dialect: before.Dialect})
	if err != nil {
		return "output_unreadable: " + err.Error()
	}
	if after.Dialect != before.Dialect || len(after.Messages) != len(before.Messages) {
		return "structure_changed: message count or dialect"
	}
	for i, bm := range before.Messages {
		am := after.Messages[i]
		if am.Kind != bm.Kind || am.Whole != bm.Whole || am.PartsKey != bm.PartsKey || len(am.Parts) != len(bm.Parts) {
			return fmt.Sprintf("structure_changed: message %d", i)
		}
		for k, bp := range bm.Parts {
			ap := am.Parts[k]
			if ap.Kind != bp.Kind || ap.CallID != bp.CallID || ap.ToolName != bp.ToolName || ap.Synthetic != bp.Synthetic {
				return fmt.Sprintf("pairs_changed: message %d part %d", i, k)
			}
			if bp.Kind == repair.PartResult && resultIsError(before.Dialect, bp.Raw) != resultIsError(before.Dialect, ap.Raw) {
				return fmt.Sprintf("error_flag_changed: message %d part %d", i, k)
			}
		}
		if i >= t.boundary && !bytes.Equal(am.Raw, bm.Raw) {
			return fmt.Sprintf("suffix_changed: message %d", i)
		}
	}
	if t.boundary < len(before.Messages) {
		bOff, ok1 := offsetIn(msgs, before.Messages[t.boundary].Raw)
		aOff, ok2 := offsetIn(out, after.Messages[t.boundary].Raw)
		if !ok1 || !ok2 || !bytes.Equal(msgs[bOff:], out[aOff:]) {
			return "suffix_changed"
		}
	}
	va, err := repair.Validate(out, repair.Options{Dialect: before.Dialect, QuietPeriod: -1})
	if err != nil {
		return "output_unreadable: " + err.Error()
	}
	had := map[repair.IssueCode]int{}
	for _, is := range v.Issues {
		had[is.Code]++
	}
	for _, is := range va.Issues {
		if had[is.Code]--; had[is.Code] < 0 {
			return "new_issue: " + string(is.Code)
		}
	}
	return ""
}
