package repair

import (
	"fmt"
	"unsafe"
)

// What a repair holds per block and per message it read, beyond the input: the
// scanner's records, the part each becomes, and what pairing adds for a call (its
// record, its decoded id, its key's chain and index slots). Every block is counted as a
// call, the costlier kind, so the estimate errs high; TestWorkingSetErrsHigh measures
// it. The report, which grows with the faults found, is counted as it grows
// (reportMemory).
const (
	blockMemory = int64(unsafe.Sizeof(block{})+unsafe.Sizeof(part{})+unsafe.Sizeof(callRef{})+unsafe.Sizeof(keyChain{})) +
		idMemory + indexMemory
	// A message's record, block arrays, edit, turn, list of results placed after it
	// (plan.after) and slot (plan.slotOf), the arrays and the list counted as if every
	// message had them; in the whole-message dialects a message is a part too.
	messageMemory = int64(unsafe.Sizeof(message{})+unsafe.Sizeof(arrayBlocks{})+unsafe.Sizeof(edit{})+unsafe.Sizeof(turnRef{})+
		unsafe.Sizeof([][]byte{})+4) + blockMemory
	memberMemory = int64(unsafe.Sizeof(member{}))
	// indexMemory is a call's share of callIndex: up to four 4-byte slots.
	indexMemory = 16
	idMemory    = 16 // an id kept apart from the input (escaped or rewritten), or an id-less call's key (callKey)
	// An action or issue holds its record, with as much again for the arrays append
	// outgrew, and its strings: a call id, a tool name and a detail (about 64 bytes).
	actionMemory    = 2*int64(unsafe.Sizeof(Action{})) + entryTextMemory
	issueMemory     = 2*int64(unsafe.Sizeof(Issue{})) + entryTextMemory
	entryTextMemory = 64
)

// DefaultMaxMemory is the default Options.MaxMemory of a run or a file check that takes
// sessions up to maxBytes: 16 MiB plus 8 bytes per byte. The engine refuses as
// too_large a session it estimates would need more, which only transcripts of many
// tiny blocks reach (a million 60-byte tool blocks: about 3.6 times their size), so that
// no session within maxBytes makes the process run out of memory.
func DefaultMaxMemory(maxBytes int64) int64 { return 16<<20 + 8*maxBytes }

// workingSet estimates the memory a repair of what the scanner has read so far takes.
func (sc *scanner) workingSet() int64 {
	return int64(sc.numBlocks)*blockMemory + int64(sc.numMsgs)*messageMemory + int64(sc.numMembers)*memberMemory
}

// reportMemory estimates what the report holds so far.
func (p *plan) reportMemory() int64 {
	return int64(len(p.report.Actions))*actionMemory + int64(len(p.report.Issues))*issueMemory
}

// overMemory reports whether the working set with the report is over Options.MaxMemory:
// a transcript whose every call is faulty grows a report larger than its records.
func (p *plan) overMemory() bool {
	return p.sc.maxMemory > 0 && p.sc.workingSet()+p.reportMemory() > p.sc.maxMemory
}

// checkReport refuses the transcript once its report takes it over Options.MaxMemory.
func (p *plan) checkReport() error {
	if !p.overMemory() {
		return nil
	}
	need, issues := p.sc.workingSet()+p.reportMemory(), len(p.report.Issues)
	p.report.Actions, p.report.Issues, p.report.StageCounts, p.report.PendingCalls = nil, nil, nil, 0
	return p.fail(StatusTooLarge, "repairing it would take over %d MiB of memory (%d blocks, a report of over %d issues), "+
		"more than the %d MiB limit; left unchanged", need>>20, p.sc.numBlocks, issues, p.sc.maxMemory>>20)
}

// checkMemory refuses to read on once the working set is over Options.MaxMemory.
func (sc *scanner) checkMemory() error {
	if sc.maxMemory > 0 {
		if need := sc.workingSet(); need > sc.maxMemory {
			return &memoryError{need: need, limit: sc.maxMemory}
		}
	}
	return nil
}

// memoryError stops the scan of a transcript over Options.MaxMemory.
type memoryError struct{ need, limit int64 }

func (e *memoryError) Error() string {
	return fmt.Sprintf("needs about %d bytes of memory, over the %d-byte limit", e.need, e.limit)
}
