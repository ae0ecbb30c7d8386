package repair

import (
	"fmt"
	"unsafe"
)

// What a repair holds per block and per message it read, beyond the input: the
// scanner's records, the part each becomes, and what pairing adds for a call (its
// record, its decoded id, its key's chain and map entry). Every block is counted as a
// call, the costlier kind, so the estimate errs high; TestWorkingSetErrsHigh measures
// it. Not counted: the report, which grows with the faults found (an action or issue
// is about 100 bytes).
const (
	blockMemory = int64(unsafe.Sizeof(block{})+unsafe.Sizeof(part{})+unsafe.Sizeof(callRef{})+unsafe.Sizeof(keyChain{})) +
		idMemory + mapEntryMemory
	messageMemory = int64(unsafe.Sizeof(message{})+unsafe.Sizeof(edit{})+unsafe.Sizeof(turnRef{})+4) + blockMemory // whole-message dialects: a message is a part
	memberMemory  = int64(unsafe.Sizeof(member{}))
	// mapEntryMemory is a map[string]int32 entry with its share of the table.
	mapEntryMemory = 40
	idMemory       = 16 // a short id decoded into a string
)

// DefaultMaxMemory is the default Options.MaxMemory of a run or a file check that takes
// sessions up to maxBytes: 16 MiB plus 8 bytes per byte. The engine refuses as
// too_large a session it estimates would need more, which only transcripts of many
// tiny blocks reach (a million 60-byte tool blocks: about 8 times their size), so that
// no session within maxBytes makes the process run out of memory.
func DefaultMaxMemory(maxBytes int64) int64 { return 16<<20 + 8*maxBytes }

// workingSet estimates the memory a repair of what the scanner has read so far takes.
func (sc *scanner) workingSet() int64 {
	return int64(sc.numBlocks)*blockMemory + int64(sc.numMsgs)*messageMemory + int64(sc.numMembers)*memberMemory
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
