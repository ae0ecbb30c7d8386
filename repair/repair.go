// Package repair validates and repairs LLM conversation transcripts whose tool calls and
// tool results are out of step. It is pure: no I/O, clock, randomness or environment.
//
// A transcript is a JSON array of messages in one of seven dialects (see Dialects). Repair
// returns the repaired array and a Report of every action, grouped in fixed stages;
// Validate reports the same faults as stable issue codes without changing anything.
// Untouched messages keep their exact bytes; touched ones keep unknown fields and the
// exact text of their numbers.
package repair

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultQuietPeriod is how long after a session's last change the calls of its last turn
// are still taken to be running.
const DefaultQuietPeriod = 10 * time.Minute

// MaxClockSkew is how far ahead of Now a session's last change may be dated and still
// count as recent (the writer's clock and tmend's differ); a later date is reported in
// the report's Reason and gives no quiet period.
const MaxClockSkew = 5 * time.Minute

// FailedTurnPolicy says what happens to calls of a turn that ended in error or abort
// whose results did arrive.
type FailedTurnPolicy string

const (
	// FailedTurnsKeep keeps such calls with their results (the default).
	FailedTurnsKeep FailedTurnPolicy = "keep"
	// FailedTurnsStrip removes them and their results too, for clients that drop failed
	// turns before sending.
	FailedTurnsStrip FailedTurnPolicy = "strip"
)

// Options tune a repair. The zero value detects the dialect and applies no quiet period.
type Options struct {
	// Dialect forces a dialect; "" detects it.
	Dialect Dialect
	// Now and UpdatedAt (the session's last change) decide the quiet period: while
	// Now-UpdatedAt < QuietPeriod, calls of the last turn may still be running and get no
	// synthetic result. Either one zero means no quiet period; an UpdatedAt more than
	// MaxClockSkew after Now gives none either, and the report's Reason says so.
	Now, UpdatedAt time.Time
	// QuietPeriod defaults to DefaultQuietPeriod; negative disables it.
	QuietPeriod time.Duration
	// Force repairs pending calls too.
	Force bool
	// FailedTurns defaults to FailedTurnsKeep.
	FailedTurns FailedTurnPolicy
	// Target rewrites call ids the provider would reject; "" rewrites none.
	Target Target
	// MaxMemory bounds the memory a repair takes, in bytes, as the engine estimates it
	// while it reads (per block and per message, see workingSet): a transcript that would
	// need more is refused with StatusTooLarge and left unchanged, rather than exhaust
	// memory. Zero: no bound.
	MaxMemory int64
}

// Result is a repaired transcript with its report.
type Result struct {
	// Messages is the repaired JSON array; when nothing changed, the input itself.
	// RepairPieces leaves it nil when something changed, and gives Pieces instead.
	Messages []byte
	// Pieces are the repaired array as RepairPieces gives it: joined, they are Messages.
	Pieces [][]byte
	Report Report
}

// Changed reports whether Messages differs from the input.
func (r *Result) Changed() bool { return r.Report.Status == StatusRepaired }

// Repair repairs the transcript msgs (a JSON array of messages). A transcript tmend will
// not touch (not JSON, not an array of objects, mixed dialects) comes back unchanged with
// an *UnrepairableError whose status and reason the report repeats.
func Repair(msgs []byte, opts Options) (Result, error) {
	p, err := newPlan(msgs, opts)
	defer p.release()
	if err != nil {
		return Result{Messages: msgs, Report: p.report}, err
	}
	if len(p.report.Actions) == 0 {
		p.report.MessagesOut = p.report.MessagesIn
		return Result{Messages: msgs, Report: p.report}, nil
	}
	out := p.assemble()
	p.report.MessagesOut = len(out)
	return Result{Messages: JoinOrigins(out), Report: p.report}, nil
}

// RepairedSize is Repair for a caller that needs only the report and the length the
// repaired array would have (a dry run): it does not build the array, which for a large
// transcript was another copy of it at the peak of memory.
func RepairedSize(msgs []byte, opts Options) (Report, int, error) {
	p, err := newPlan(msgs, opts)
	defer p.release()
	if err != nil {
		return p.report, len(msgs), err
	}
	if len(p.report.Actions) == 0 {
		p.report.MessagesOut = p.report.MessagesIn
		return p.report, len(msgs), nil
	}
	out := p.assemble()
	p.report.MessagesOut = len(out)
	return p.report, OriginsLen(out), nil
}

// RepairPieces is Repair giving the repaired array in the pieces it is made of, in
// order, rather than joined (Result.Pieces): the runs of msgs it keeps, as slices of msgs
// (valid as long as msgs is), and the bytes the repair made, handed over as WriteDocument
// hands them. For a transcript of tens of megabytes, the joined array was another copy of
// it at the peak of a writing scan, whose store sends the pieces as they are. The plan is
// not pooled, so that nothing it made is reused while the pieces live.
func RepairPieces(msgs []byte, opts Options) (Result, error) {
	p, err := newPlan(msgs, opts)
	if err != nil || len(p.report.Actions) == 0 {
		res := Result{Messages: msgs, Report: p.report}
		p.release()
		if err == nil {
			res.Report.MessagesOut = res.Report.MessagesIn
		}
		return res, err
	}
	out := p.assemble()
	p.report.MessagesOut = len(out)
	// Counted first, then made in a slice of that size: there is a piece a message when
	// the input has space between them (jsonb's text has), and one grown by append left
	// as much again as garbage.
	var n pieceCount
	start := skipSpace(msgs, 0)
	write := func(w Pieces) {
		k := keeper{w: w}
		p.writeArray(&k, msgs, start)
		k.flush()
	}
	write(&n)
	l := pieceList{src: msgs, bufs: make([][]byte, 0, n)}
	write(&l)
	return Result{Pieces: l.bufs, Report: p.report}, nil
}

// pieceList collects an output as Pieces, without copying: a run kept is a slice of the
// input, and bytes written are separators or assembled messages, which nothing changes
// once assembled (the plan that made them is not reused: RepairPieces).
type pieceList struct {
	src  []byte
	bufs [][]byte
}

func (l *pieceList) Keep(from, to int) { l.bufs = append(l.bufs, l.src[from:to]) }
func (l *pieceList) Write(p []byte)    { l.bufs = append(l.bufs, p) }

// pieceCount counts the pieces a pieceList would hold.
type pieceCount int

func (n *pieceCount) Keep(int, int) { *n++ }
func (n *pieceCount) Write([]byte)  { *n++ }

// StatusBroken is Validate's status for a transcript with faults a repair would fix.
const StatusBroken Status = "broken"

// Validate reports the faults of msgs without changing anything. The report's Actions
// are what Repair would do. Status is clean, pending, broken, or as for Repair.
func Validate(msgs []byte, opts Options) (Report, error) {
	p, err := newPlan(msgs, opts)
	defer p.release()
	if err != nil {
		return p.report, err
	}
	r := p.report
	r.MessagesOut = r.MessagesIn
	if len(r.Issues) > 0 {
		r.Status = StatusBroken
	}
	return r, nil
}

// callRef, resultRef and turnRef hold indexes in 32 bits, as the engine's offsets are (MaxSize):
// a transcript of many small blocks has one of them per block.
type callRef struct {
	msg, part int32
	turn      int32
	// firstRes and lastRes chain its results (resultRef.nextRes) in transcript order; -1
	// when it has none. nextSame chains the calls that share its key.
	firstRes, lastRes, nextSame int32
	kept                        int32 // the result it keeps, or -1
	slotted                     bool  // a result in its turn's slot is paired with it
	answered                    bool  // a real result is paired with it
	removed                     bool
	renew                       bool // in place: another call that reuses an earlier one's id
}

// keyChain is the list of well-formed calls sharing a key, with two cursors that only
// move forward while results are paired in transcript order, so pairing stays linear
// however many calls share an id. A key of one call, as most are, has none in
// plan.chains: its index slot holds the call (loneCall), whose chain is made when a
// result looks it up (plan.chain); with one call, cursors kept would move no further.
type keyChain struct {
	head, tail int32
	before     int32 // the latest call before the result being paired, or -1
	inTurn     int32 // the first call whose turn is not before the result's slot turn
	// mixed: the calls' ids are not all written alike (some padded), so a result prefers
	// the call whose id it repeats exactly.
	mixed bool
}

// resultRef keeps no key: pair finds its call as it goes, and later an orphan's key is
// its trimmed id.
type resultRef struct {
	msg, part int32
	nextRes   int32 // the next result of the same call, or -1
	call      int32 // -1: no call
	slotted   bool  // in the slot of its call's turn
	inSlot    bool  // slotted and, where the dialect needs it, ahead of other parts
}

type turnRef struct {
	first, last int32 // message range (one message except for Responses item runs)
	slotLast    int32 // whole dialects: last message of the result run after the turn, or last
	slotMsg     int32 // block dialects: the user message taking the results, or -1
	incoming    []incoming
}

// incoming is a result to place in a turn's slot: a moved one or a synthetic one.
type incoming struct {
	call   int
	result int // -1 for synthetic
}

type edit struct {
	// removedAt is where the message's removed flags, one per part, start in
	// plan.removed (removedOf): an index, not a slice, as every message has an edit.
	removedAt int32
	stage     stageCode // why it was dropped, or last lost a part
	drop      bool
	dirty     bool
	merge     bool // merged into the message before it (see planMerges)
}

type plan struct {
	ps      parser
	partMs  []member // partType's members, reused
	sc      scanner
	opts    Options
	msgs    []message
	spec    *spec
	calls   []callRef
	results []resultRef
	turns   []turnRef
	slotOf  []int32   // message index -> turn whose slot it is, or -1
	byKey   callIndex // key -> index in chains or a lone call (loneCall); calls in the in-place dialects
	chains  []keyChain
	names   map[string]int // id-less calls of the current turn by name, while finding turns
	// suspects are the ids of results about to be dropped as orphans and of calls about to
	// get a synthetic result, which no unrecognised block may carry (checkUnrecognized).
	suspects map[string]bool
	// skip is the known values of the message checkUnrecognized is searching.
	skip [][]byte
	// unsureOrphan is a result without an id about to be dropped as an orphan although it
	// has an id-like member somewhere (so checkUnrecognized refuses), or -1.
	unsureOrphan int
	removed      []bool // the edits' removed flags, in one slab
	src          []byte // the input the messages were scanned from
	edits        []edit
	// The results placed after a message (moved or made), apart for the few messages
	// that have any: afterAt[i] is 1 + the index of message i's list in after, else 0.
	afterAt []int32
	after   [][][]byte
	out     []Origin // assemble's result, reused
	report  Report

	// idlessOpen counts by name the calls without an id among calls[:idlessSeen] that have
	// no real result yet. Filled only once a response without an id is met outside a slot.
	idlessOpen map[string]openCalls
	// idlessKeys are the keys of the id-less calls by call index (callKey), up to the last
	// one; none when every call has an id.
	idlessKeys []string
	idlessSeen int
	// ambiguous is a response without an id that several calls may answer (strayCall), of
	// ambiguousN calls, or -1; checkUnrecognized refuses it.
	ambiguous, ambiguousN int
	// unmerged is a message that must be merged into the one before it (spec.mergeAdjacent)
	// but cannot be without losing a member, and unmergedWhy what the two are; -1: none.
	unmerged    int
	unmergedWhy string
}

var plans = sync.Pool{New: func() any {
	return &plan{names: map[string]int{}, suspects: map[string]bool{}}
}}

// poolMax is the largest input whose plan is pooled. A larger one's slabs (several times
// the input) would stay live in the pool, past the next collection, while the caller
// writes the result; allocating them again costs little beside reading that input.
const poolMax = 1 << 20

// newPlan analyses b. Plans are pooled, with their slabs, because repairing many
// transcripts is allocation-bound otherwise; call release when done, and keep nothing of
// the plan but its report.
func newPlan(b []byte, opts Options) (*plan, error) {
	p := plans.Get().(*plan)
	p.opts = opts
	if err := p.checkSize(b); err != nil {
		return p, err
	}
	if err := p.scanAll(b); err != nil {
		return p, err
	}
	return p, p.analyze()
}

// MaxSize is the largest transcript or document the engine takes, in bytes: it keeps
// offsets into the input in 32 bits, which halves the memory of its member lists.
const MaxSize = math.MaxInt32

// checkSize refuses an input over MaxSize (unparseable), before any offset is taken;
// parseDocument does the same for documents.
func (p *plan) checkSize(b []byte) error {
	if len(b) > MaxSize {
		return p.fail(StatusUnparseable, "input of %d bytes is over the engine's limit of %d bytes", len(b), MaxSize)
	}
	return nil
}

// scanAll scans b, which must be one JSON array of objects and nothing else.
func (p *plan) scanAll(b []byte) error {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '[' {
		if err := validate(b); err != nil {
			return p.fail(StatusUnparseable, "%v", err)
		}
		return p.fail(StatusUnparseable, "transcript is a JSON %s, not an array of messages", kindOf(b[i]))
	}
	end, err := p.scan(b, i)
	if err != nil {
		return err
	}
	if k := skipSpace(b, end); k != len(b) {
		return p.fail(StatusUnparseable, "%v", &SyntaxError{k, "unexpected data after the top-level value"})
	}
	return nil
}

// analyze runs everything after scanning: dialect, parse, pairing and the stages.
func (p *plan) analyze() error {
	if err := p.parse(); err != nil {
		return err
	}
	if p.spec == nil {
		p.report.Status = StatusClean
		return nil
	}
	if p.ps.err != nil {
		return p.fail(StatusUnparseable, "message %d: %v", p.ps.errMsg, p.ps.err)
	}
	if p.ps.doubt != "" {
		why := "so what it is, or which call it answers, is unclear"
		if p.ps.doubtOrder {
			why = "" // an order check's reason says why itself
		}
		return p.refuse(p.ps.doubtMsg, "", p.ps.doubt, why)
	}
	if p.spec.inPlace {
		p.decideInPlace()
		if err := p.checkReport(); err != nil {
			return err
		}
		if rule := p.providerRunsTo(); rule != providerRunsTaken {
			p.dropProviderRuns(rule)
		}
		if p.opts.Target != "" {
			p.retarget()
		}
		p.finish()
		return p.checkReport()
	}
	p.findTurns()
	p.pair()
	p.decide()
	if err := p.checkReport(); err != nil {
		return err
	}
	if err := p.checkUnrecognized(); err != nil {
		return err
	}
	if p.ps.toolish != "" {
		p.report.Dialect = ""
		return p.fail(StatusUnknownDialect, "message %d: %s", p.ps.toolishMsg, p.ps.toolish)
	}
	p.normalizeArguments()
	p.uniqueIDs()
	p.alignPaddedIDs()
	if rule := p.providerRunsTo(); rule != providerRunsTaken {
		p.dropProviderRuns(rule)
	}
	if p.opts.Target != "" {
		p.retarget()
	}
	p.finish()
	if p.unmerged >= 0 {
		return p.refuse(p.unmerged, "", p.unmergedWhy, "and merging them would lose a member the two hold with different values")
	}
	return p.checkReport()
}

// normalizeArguments writes the arguments of each surviving call that holds them in a
// JSON type the provider rejects (partArgsRetype) in the type it takes: an object or
// array as the JSON string of its compact text, a string as the compact object it holds.
func (p *plan) normalizeArguments() {
	for ci := range p.calls {
		c := &p.calls[ci]
		pt := p.part(c.msg, c.part)
		if c.removed || !pt.is(partArgsRetype) {
			continue
		}
		v := valueAt(pt.raw(), p.spec.argsPath)
		if v == nil {
			continue
		}
		text, asString := v, v[0] != '"'
		detail := fmt.Sprintf("arguments stored as a JSON %s written as their JSON text", kindOf(v[0]))
		if !asString {
			s, _ := idString(v)
			text, detail = []byte(s), "arguments stored as a JSON string written as the object it holds"
		}
		var compact bytes.Buffer
		if json.Compact(&compact, text) != nil {
			continue // the dialect marks only valid JSON: never so
		}
		val := compact.Bytes()
		if asString {
			val = jsonString(compact.String())
		}
		pt.setRaw(setPath(pt.raw(), p.spec.argsPath, val))
		p.edits[c.msg].dirty = true
		p.issue(IssueArgumentsType, int(c.msg), pt, "")
		p.act(StageNormalizeArguments, ActionRewrite, int(c.msg), pt, detail)
	}
}

// release empties the plan, keeping its slabs' capacity, and returns it to the pool; a
// plan over poolMax is dropped instead. Entries past each slab's length are not cleared:
// every one is overwritten before it is read, and the pool drops plans at each GC, so
// stale ones keep old input alive only briefly (clearing them cost more than the rest of
// a small repair, in write barriers).
func (p *plan) release() {
	if len(p.src) > poolMax {
		return
	}
	clear(p.names)
	clear(p.suspects)
	clear(p.idlessOpen)
	*p = plan{
		msgs: p.msgs[:0], slotOf: p.slotOf[:0], calls: p.calls[:0], results: p.results[:0], chains: p.chains[:0],
		turns: p.turns[:0], edits: p.edits[:0], afterAt: p.afterAt[:0], after: p.after[:0], out: p.out[:0], removed: p.removed[:0],
		idlessKeys: p.idlessKeys[:0],
		byKey:      p.byKey, names: p.names, suspects: p.suspects, idlessOpen: p.idlessOpen,
		sc: scanner{members: p.sc.members[:0], blockMembers: p.sc.blockMembers[:0], blocks: p.sc.blocks[:0],
			fieldMembers: p.sc.fieldMembers[:0], fields: p.sc.fields[:0], arrays: p.sc.arrays[:0]},
		ps: parser{scratch: p.ps.scratch[:0], parts: p.ps.parts[:0], knownValues: p.ps.knownValues[:0],
			canonicals: p.ps.canonicals[:0], idTexts: p.ps.idTexts[:0], idStrs: p.ps.idStrs[:0], hashes: p.ps.hashes[:0]},
	}
	plans.Put(p)
}

// grow returns s resized to n zero elements, reusing its capacity.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}

func (p *plan) fail(status Status, format string, args ...any) error {
	p.report.Status = status
	p.report.Reason = fmt.Sprintf(format, args...)
	return &UnrepairableError{Status: status, Reason: p.report.Reason}
}

// scan validates the array of messages at b[i] while collecting each message's members
// (one pass over the bytes), and returns the array's end.
func (p *plan) scan(b []byte, i int) (int, error) {
	p.src, p.ps.src = b, b
	p.sc.maxMemory = p.opts.MaxMemory
	end, err := scanElements(b, i, 1, func(j int) (int, error) {
		n := len(p.msgs)
		if b[j] != '{' {
			if end, err := scanValue(b, j, 2); err != nil {
				return end, err
			}
			return j, p.fail(StatusUnparseable, "message %d is a JSON %s, not an object", n, kindOf(b[j]))
		}
		if len(p.msgs) == cap(p.msgs) {
			p.msgs = slices.Grow(p.msgs, messagesRoom(len(p.msgs), j-i, len(b)-j))
		}
		p.msgs = append(p.msgs, message{}) // filled in place, not built and copied
		m := &p.msgs[len(p.msgs)-1]
		end, err := p.sc.scanMessage(b, j, m)
		if err != nil {
			p.msgs = p.msgs[:n]
			return end, p.messageFailed(n, err)
		}
		m.setRaw(b[j:end])
		return end, nil
	})
	var ue *UnrepairableError
	if err != nil && !errors.As(err, &ue) {
		err = p.fail(StatusUnparseable, "%v", err)
	}
	return end, err
}

// messagesRoom is how many more message records to make room for when n messages in
// read bytes fill the slab and left bytes remain: as many as the bytes left hold at the
// rate so far (an eighth more), between a quarter and 31 times n. Each outgrown slab
// stays as garbage until a collection, which seldom runs while one transcript is read:
// doubling left about as much again as the slab, growing by estimate a small share.
func messagesRoom(n, read, left int) int {
	est := int(int64(n) * int64(left) / int64(max(read, 1)))
	return min(max(est+est/8+8, n/4), 31*max(n, 1))
}

// messageFailed is the error for message n, which could not be scanned: too large or
// unparseable.
func (p *plan) messageFailed(n int, err error) error {
	var big *memoryError
	if errors.As(err, &big) {
		return p.fail(StatusTooLarge, "repairing it would take over %d MiB of memory (%d blocks by message %d), "+
			"more than the %d MiB limit; left unchanged", big.need>>20, p.sc.numBlocks, n, big.limit>>20)
	}
	return p.fail(StatusUnparseable, "message %d: %v", n, err)
}

// parse detects the dialect (unless forced) and finds each message's calls and results.
func (p *plan) parse() error {
	p.report.MessagesIn = len(p.msgs)
	d := p.opts.Dialect
	p.ps.fields = p.sc.fields // for detection and the parsers
	found, err := detect(p.msgs, &p.ps)
	switch {
	case err != nil:
		return p.fail(StatusUnknownDialect, "%v", err)
	case d == "" && found == "":
		// No tool calls or results of any dialect: clean, but only if every message can
		// be read as one that holds none.
		for j := range p.msgs {
			if !plainMessage(&p.msgs[j]) {
				return p.fail(StatusUnknownDialect, "message %d (%s) is not a message tmend can read, "+
					"and no dialect's tool call or result shape was found", j, p.msgs[j].describe())
			}
		}
		return nil
	case d == "":
		d = found
	case found != "" && found != d:
		return p.fail(StatusUnknownDialect, "the transcript has %s shapes, not the forced %s ones", found, d)
	}
	p.ps.detected = d
	p.spec = specOf(d)
	if p.spec == nil {
		return p.fail(StatusUnknownDialect, "unknown dialect %q", d)
	}
	p.report.Dialect = d
	// Every part is a block or a whole message (never in the block dialects): size the
	// slab once, as a large transcript would otherwise spend most of its time growing it.
	n := p.sc.numBlocks
	if !p.spec.block {
		n += len(p.msgs)
	}
	p.ps.parts = slices.Grow(p.ps.parts[:0], n)
	for j := range p.msgs {
		p.ps.msg = j
		if err := p.spec.parse(&p.msgs[j], &p.ps); err != nil {
			return p.fail(StatusUnparseable, "message %d: %v", j, err)
		}
	}
	if p.spec.order != nil && p.ps.doubt == "" {
		if at, why := p.spec.order(p.msgs, &p.ps); why != "" {
			p.ps.doubt, p.ps.doubtMsg, p.ps.doubtOrder = why, at, true
		}
	}
	if p.ps.foreign != "" {
		p.report.Dialect = ""
		return p.fail(StatusUnknownDialect, "shapes of several dialects are mixed: %s, and %s (message %d)",
			d, p.ps.foreign, p.ps.foreignMsg)
	}
	if p.ps.unknown != "" {
		p.report.Dialect = ""
		return p.fail(StatusUnknownDialect, "message %d: %s", p.ps.unknownMsg, p.ps.unknown)
	}
	// A message the dialect does not recognise may hold calls or results tmend cannot
	// see: never clean, never repaired. So may a member where some dialect keeps them
	// that this one did not read (an OpenAI function_call on an Anthropic message, a
	// system message's tool_calls).
	for j := range p.msgs {
		m := &p.msgs[j]
		if !m.known {
			p.report.Dialect = ""
			return p.fail(StatusUnknownDialect, "message %d (%s) is not a message of the %s dialect that tmend knows", j, m.describe(), d)
		}
		if name, ok := p.unreadCallMember(m); ok {
			p.report.Dialect = ""
			return p.fail(StatusUnknownDialect, "message %d (%s) has a member %q, where the %s dialect reads no tool call or result", j, m.describe(), name, d)
		}
	}
	return nil
}

// unreadCallMember returns the name of a member of m, not empty, under which some dialect
// keeps tool calls, results or their ids (callKey) and which the dialect's parser did not
// read: m's parts member, any member of a message that is itself a call or result, and
// the AI SDK 4 toolInvocations mirror of an in-place dialect.
func (p *plan) unreadCallMember(m *message) (string, bool) {
	if m.whole() {
		return "", false
	}
	raw, ms := m.raw(), m.ms()
	for i := range ms {
		mb := &ms[i]
		if !callKey(*mb, raw) || isEmptyValue(mb.val(raw)) || mb.code() != keyOther && mb.code() == m.partsKey && m.partsIn == keyOther ||
			mb.code() == keyToolInvocations && p.spec.inPlace {
			continue
		}
		return mb.name(raw), true
	}
	return "", false
}

func kindOf(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// findTurns finds each call turn and the slot right after it where its results belong.
func (p *plan) findTurns() {
	n := len(p.msgs)
	p.slotOf = grow(p.slotOf, n)
	// Sized once: grown by append, they left about four times their size as garbage on
	// a transcript of a million blocks.
	calls, results, callMsgs := p.countParts()
	p.calls = slices.Grow(p.calls[:0], calls)
	p.results = slices.Grow(p.results[:0], results)
	p.turns = slices.Grow(p.turns[:0], callMsgs) // a turn starts at a message with a call
	for i := range p.slotOf {
		p.slotOf[i] = -1
	}
	hasCall := func(m *message) bool {
		parts := m.parts()
		for pi := range parts {
			if parts[pi].kind == partCall {
				return true
			}
		}
		return false
	}
	for i := 0; i < n; i++ {
		m := &p.msgs[i]
		if !hasCall(m) {
			continue
		}
		t := turnRef{first: int32(i), last: int32(i), slotMsg: -1}
		if m.kind == msgCall {
			// A Responses turn is a run of call items, reasoning items between them included.
			for j := i + 1; j < n && (p.msgs[j].kind == msgCall || p.msgs[j].reasoning); j++ {
				if p.msgs[j].kind == msgCall {
					t.last = int32(j)
				}
			}
		}
		ti := len(p.turns)
		j := int(t.last) + 1
		if p.spec.block {
			if j < n && p.msgs[j].kind == msgUser && p.msgs[j].partsKey != keyOther &&
				(p.spec.anyUserSlot || hasResult(&p.msgs[j])) {
				t.slotMsg = int32(j)
				p.slotOf[j] = int32(ti)
				for p.spec.slotRun && j+1 < n && p.msgs[j+1].kind == msgUser && p.msgs[j+1].partsKey != keyOther {
					j++
					p.slotOf[j] = int32(ti)
				}
			}
			t.slotLast = t.last
		} else {
			for j < n && p.msgs[j].kind == msgResult {
				p.slotOf[j] = int32(ti)
				j++
			}
			t.slotLast = int32(j - 1)
		}
		clear(p.names)
		for k := t.first; k <= t.last; k++ {
			for pi := range p.msgs[k].parts() {
				pt := &p.msgs[k].parts()[pi]
				if pt.kind != partCall {
					continue
				}
				if !pt.hasID {
					for len(p.idlessKeys) < len(p.calls) {
						p.idlessKeys = append(p.idlessKeys, "") // calls with ids
					}
					p.idlessKeys = append(p.idlessKeys, idlessKey(ti, pt.name(), p.names[pt.name()]))
					p.names[pt.name()]++
				}
				p.calls = append(p.calls, callRef{msg: int32(k), part: int32(pi), turn: int32(ti), kept: -1,
					firstRes: -1, lastRes: -1, nextSame: -1})
			}
		}
		p.turns = append(p.turns, t)
		i = int(t.last)
	}
}

// countParts counts the calls and results of all messages, and the messages with a call.
func (p *plan) countParts() (calls, results, callMsgs int) {
	for i := range p.msgs {
		had := calls
		parts := p.msgs[i].parts()
		for pi := range parts {
			switch parts[pi].kind {
			case partCall:
				calls++
			case partResult:
				results++
			}
		}
		if calls > had {
			callMsgs++
		}
	}
	return calls, results, callMsgs
}

// idlessKey pairs id-less Gemini calls and responses by turn, name and order.
func idlessKey(turn int, name string, rank int) string {
	return fmt.Sprintf("\x00%d\x00%s\x00%d", turn, name, rank)
}

func hasResult(m *message) bool {
	parts := m.parts()
	for pi := range parts {
		if parts[pi].kind == partResult {
			return true
		}
	}
	return false
}

func (p *plan) part(msg, pi int32) *part { return &p.msgs[msg].parts()[pi] }

// pair attaches each result to a call: the matching call of the turn whose slot holds
// it, else the latest matching call before it, else the first after it. Ids match when
// they are equal after trimming surrounding white space. A response without an id pairs
// by position and name: in a slot, with its turn's calls without an id; outside one,
// with the one earlier such call left without a real result (strayCall). A result whose
// id is blank, alone in the slot of a turn with one call left without a result, can
// answer only that call (whole-message dialects, as LiteLLM pairs it).
func (p *plan) pair() {
	p.ambiguous = -1
	var blanks []int32           // results with a blank id in a slot, unpaired
	var prevSame map[int32]int32 // a call -> the call before it with its key; made on reuse
	p.byKey.reset(len(p.calls))
	for ci := range p.calls {
		c := &p.calls[ci]
		if p.part(c.msg, c.part).malformed != wellFormed {
			continue
		}
		if v, slot, ok := p.byKey.find(p.callKey(int32(ci)), p.chainKey); ok {
			if v&loneCall != 0 { // the key's second call
				head := v &^ loneCall
				v = int32(len(p.chains))
				p.byKey.set(slot, v)
				p.chains = append(p.chains, keyChain{head: head, tail: head, before: -1, inTurn: head})
			}
			ch := &p.chains[v]
			if prevSame == nil {
				prevSame = map[int32]int32{}
			}
			prevSame[int32(ci)] = ch.tail
			p.calls[ch.tail].nextSame = int32(ci)
			ch.tail = int32(ci)
			ch.mixed = ch.mixed || p.ps.id(p.part(c.msg, c.part)) != p.ps.id(p.part(p.calls[ch.head].msg, p.calls[ch.head].part))
		} else {
			p.byKey.set(slot, int32(ci)|loneCall)
		}
	}
	var lone keyChain
	var slotNames map[[2]int]map[string]int // (turn, msg) -> name -> id-less results seen
	for mi := range p.msgs {
		m := &p.msgs[mi]
		lead := true // only results so far in this message
		parts := m.parts()
		for pi := range parts {
			pt := &parts[pi]
			if pt.kind != partResult {
				lead = false
				continue
			}
			r := resultRef{msg: int32(mi), part: int32(pi), call: -1, nextRes: -1}
			key := strings.TrimSpace(p.ps.id(pt))
			ti, inSlot := int(p.slotOf[mi]), p.slotOf[mi] >= 0
			if !pt.hasID {
				key = ""
				if inSlot {
					k := [2]int{ti, mi}
					if slotNames == nil {
						slotNames = map[[2]int]map[string]int{}
					}
					if slotNames[k] == nil {
						slotNames[k] = map[string]int{}
					}
					key = idlessKey(ti, pt.name(), slotNames[k][pt.name()])
					slotNames[k][pt.name()]++
				}
			}
			if v, _, ok := p.byKey.find(key, p.chainKey); ok {
				ch := p.chain(v, &lone)
				if inSlot {
					r.call = int32(p.slotCall(ch, ti, p.ps.id(pt)))
					r.slotted = r.call >= 0
				}
				if r.call < 0 {
					r.call = int32(p.latestBefore(ch, mi, p.ps.id(pt)))
				}
				if prev, ok := prevSame[r.call]; ok && p.lateFor(r.call, prev, pt) {
					r.call, r.slotted = prev, false
				}
			} else if !pt.hasID && !inSlot {
				r.call = int32(p.strayCall(len(p.results), mi, pt.name()))
			}
			r.inSlot = r.slotted && (lead || !p.spec.resultsFirst)
			ri := int32(len(p.results))
			p.results = append(p.results, r)
			switch {
			case r.call >= 0:
				p.link(ri)
			case inSlot && !p.spec.block && pt.hasID && isBlank(p.ps.id(pt)):
				blanks = append(blanks, ri)
			}
		}
	}
	for k, ri := range blanks {
		ti := p.slotOf[p.results[ri].msg]
		if k > 0 && p.slotOf[p.results[blanks[k-1]].msg] == ti || k+1 < len(blanks) && p.slotOf[p.results[blanks[k+1]].msg] == ti {
			continue // several in one slot: which one answers is unclear
		}
		r := &p.results[ri]
		if ci := p.onlyOpenCall(int(ti)); ci >= 0 && p.mayName(r, ci) {
			r.call, r.slotted, r.inSlot = int32(ci), true, true
			p.link(ri)
		}
	}
}

// lateFor reports whether result pt, paired by its id with call ci, is rather the late
// result of prev, the call before ci with the same id: ci has a real result already and
// pt is not a copy of it, while prev has none. A later call reused the id before prev's
// result came; dropping pt as ci's duplicate would lose prev's real output.
func (p *plan) lateFor(ci, prev int32, pt *part) bool {
	c := &p.calls[ci]
	if !c.answered || p.calls[prev].answered || pt.is(partSynthetic) {
		return false
	}
	for ri := c.firstRes; ri >= 0; ri = p.results[ri].nextRes {
		if rp := p.resPart(int(ri)); !rp.is(partSynthetic) && bytes.Equal(rp.raw(), pt.raw()) {
			return false
		}
	}
	return true
}

// loneCall marks an index value (byKey) that is the only call of its key rather than
// a chain: calls and chains number under 2^30, as a call takes at least three bytes.
const loneCall = 1 << 30

// chainKey is the key of index value v.
func (p *plan) chainKey(v int32) string { return p.callKey(p.chainHead(v)) }

// chainHead is the first call of index value v.
func (p *plan) chainHead(v int32) int32 {
	if v&loneCall != 0 {
		return v &^ loneCall
	}
	return p.chains[v].head
}

// chain returns the chain of index value v; a lone call's is made in lone.
func (p *plan) chain(v int32, lone *keyChain) *keyChain {
	if v&loneCall == 0 {
		return &p.chains[v]
	}
	ci := v &^ loneCall
	*lone = keyChain{head: ci, tail: ci, before: -1, inTurn: ci}
	return lone
}

// callKey is the key that pairs call ci with its results: its id without surrounding
// white space, or for an id-less Gemini call its turn, name and rank among same-named
// calls (idlessKeys). Read from the part rather than kept in the call: a transcript of
// many small blocks has a call record per two blocks.
func (p *plan) callKey(ci int32) string {
	c := &p.calls[ci]
	if pt := p.part(c.msg, c.part); pt.hasID || int(ci) >= len(p.idlessKeys) {
		return trimID(p.ps.id(pt))
	}
	return p.idlessKeys[ci]
}

// trimID is strings.TrimSpace, with a quick way out for an id that starts and ends with
// ASCII other than space, as ids do: callKey reads a call's key at every look-up.
func trimID(id string) string {
	if n := len(id); n > 0 && id[0] > ' ' && id[0] < utf8.RuneSelf && id[n-1] > ' ' && id[n-1] < utf8.RuneSelf {
		return id
	}
	return strings.TrimSpace(id)
}

// link adds result ri to the results of its call.
func (p *plan) link(ri int32) {
	r := &p.results[ri]
	c := &p.calls[r.call]
	if c.lastRes >= 0 {
		p.results[c.lastRes].nextRes = ri
	} else {
		c.firstRes = ri
	}
	c.lastRes = ri
	c.slotted = c.slotted || r.slotted
	if !p.part(r.msg, r.part).is(partSynthetic) && !c.answered {
		if int(r.call) < p.idlessSeen {
			p.countOpen(int(r.call), -1)
		}
		c.answered = true
	}
}

// mayName reports whether result r names call ci's tool, or none.
func (p *plan) mayName(r *resultRef, ci int) bool {
	c := &p.calls[ci]
	rn := strings.TrimSpace(p.part(r.msg, r.part).name())
	return rn == "" || rn == strings.TrimSpace(p.part(c.msg, c.part).name())
}

// onlyOpenCall returns the one well-formed call of turn ti without a result, or -1 when
// there are none or several.
func (p *plan) onlyOpenCall(ti int) int {
	first, _ := slices.BinarySearchFunc(p.calls, ti, func(c callRef, t int) int { return cmp.Compare(int(c.turn), t) })
	open := -1
	for ci := first; ci < len(p.calls) && int(p.calls[ci].turn) == ti; ci++ {
		if c := &p.calls[ci]; c.firstRes < 0 && p.part(c.msg, c.part).malformed == wellFormed {
			if open >= 0 {
				return -1
			}
			open = ci
		}
	}
	return open
}

// strayCall returns the call that result ri, a response without an id outside any slot
// (in message mi, naming name), answers: the one earlier call of that name without an id
// that has no real result yet, as the response would pair in its place. -1 when there is
// none (an orphan) or several (ambiguous: two readings, so the transcript is refused).
//
// Calls of turns that ended in error or abort count only when no other call does: their
// calls are rarely run (clients do not run the calls of a failed turn).
func (p *plan) strayCall(ri, mi int, name string) int {
	if p.idlessOpen == nil {
		p.idlessOpen = map[string]openCalls{} // kept with the plan, as byKey
	}
	for ; p.idlessSeen < len(p.calls) && int(p.calls[p.idlessSeen].msg) < mi; p.idlessSeen++ {
		if !p.calls[p.idlessSeen].answered {
			p.countOpen(p.idlessSeen, 1)
		}
	}
	o := p.idlessOpen[name]
	k := 0
	if o.n[0] == 0 {
		k = 1
	}
	switch {
	case o.n[k] == 1:
		return o.sum[k]
	case o.n[k] > 1 && p.ambiguous < 0:
		p.ambiguous, p.ambiguousN = ri, o.n[k]
	}
	return -1
}

// openCalls counts calls without an id and without a real result, [0] of turns that
// completed and [1] of failed ones, with the sum of their indexes: the call itself when
// it is the only one.
type openCalls struct{ n, sum [2]int }

// countOpen adds call ci to idlessOpen (delta 1) or takes it out (-1), when it is a
// well-formed call without an id.
func (p *plan) countOpen(ci, delta int) {
	c := &p.calls[ci]
	pt := p.part(c.msg, c.part)
	if pt.hasID || pt.malformed != wellFormed {
		return
	}
	k := 0
	if p.msgs[c.msg].failed {
		k = 1
	}
	o := p.idlessOpen[pt.name()]
	o.n[k] += delta
	o.sum[k] += delta * ci
	p.idlessOpen[pt.name()] = o
}

// slotCall returns the call of turn ti in ch that a result in the turn's slot (with id
// id) answers: the first without a slotted result yet, else the first; in a mixed chain,
// one whose id is id exactly first. -1 when the turn has none.
func (p *plan) slotCall(ch *keyChain, ti int, id string) int {
	for ch.inTurn >= 0 && int(p.calls[ch.inTurn].turn) < ti {
		ch.inTurn = p.calls[ch.inTurn].nextSame
	}
	first, free, exact := -1, -1, -1
	for ci := ch.inTurn; ci >= 0 && int(p.calls[ci].turn) == ti; ci = p.calls[ci].nextSame {
		c := &p.calls[ci]
		same := ch.mixed && p.ps.id(p.part(c.msg, c.part)) == id
		switch {
		case !c.slotted && (same || !ch.mixed):
			return int(ci)
		case !c.slotted && free < 0:
			free = int(ci)
		case same && exact < 0:
			exact = int(ci)
		}
		if first < 0 {
			first = int(ci)
		}
	}
	switch {
	case free >= 0:
		return free
	case exact >= 0:
		return exact
	}
	return first
}

// latestBefore returns the latest call in ch before message mi, else the first call; in
// a mixed chain, the latest before mi whose id is id exactly, when there is one.
func (p *plan) latestBefore(ch *keyChain, mi int, id string) int {
	next := ch.head
	if ch.before >= 0 {
		next = p.calls[ch.before].nextSame
	}
	for next >= 0 && int(p.calls[next].msg) < mi {
		ch.before, next = next, p.calls[next].nextSame
	}
	if ch.mixed {
		// Rare (padded ids), so a walk from the head is fine here.
		exact := -1
		for ci := ch.head; ci >= 0 && int(p.calls[ci].msg) < mi; ci = p.calls[ci].nextSame {
			if c := &p.calls[ci]; p.ps.id(p.part(c.msg, c.part)) == id {
				exact = int(ci)
			}
		}
		if exact >= 0 {
			return exact
		}
	}
	if ch.before < 0 {
		return int(ch.head)
	}
	return int(ch.before)
}

func (p *plan) act(st Stage, kind ActionKind, msg int, pt *part, detail string) {
	p.report.Actions = append(p.report.Actions, Action{Stage: st, Action: kind, MessageIndex: msg,
		CallID: strings.Clone(p.ps.id(pt)), ToolName: strings.Clone(pt.name()), Detail: detail})
}

func (p *plan) issue(code IssueCode, msg int, pt *part, detail string) {
	p.report.Issues = append(p.report.Issues, Issue{Code: code, MessageIndex: msg,
		CallID: strings.Clone(p.ps.id(pt)), ToolName: strings.Clone(pt.name()), Detail: detail})
}

// placedAfter returns the results placed after message i.
func (p *plan) placedAfter(i int) [][]byte {
	if a := p.afterAt[i]; a > 0 {
		return p.after[a-1]
	}
	return nil
}

// placeAfter places raws after message i.
func (p *plan) placeAfter(i int, raws ...[]byte) {
	a := p.afterAt[i]
	if a == 0 {
		p.after = append(p.after, nil)
		a = int32(len(p.after))
		p.afterAt[i] = a
	}
	p.after[a-1] = append(p.after[a-1], raws...)
}

// prepareEdits sizes the edits, one per message with a removed flag per part.
func (p *plan) prepareEdits() {
	p.edits = grow(p.edits, len(p.msgs))
	p.afterAt, p.after = grow(p.afterAt, len(p.msgs)), p.after[:0]
	n := 0
	for i := range p.msgs {
		n += len(p.msgs[i].parts())
	}
	p.removed = grow(p.removed, n)
	start := 0
	for i := range p.msgs {
		p.edits[i].removedAt = int32(start)
		start += len(p.msgs[i].parts())
	}
}

// removedOf is message i's removed flags, one per part.
func (p *plan) removedOf(i int) []bool {
	at, n := int(p.edits[i].removedAt), len(p.msgs[i].parts())
	return p.removed[at : at+n : at+n]
}

// quiet reports whether the session changed within the quiet period. A change dated
// further ahead than MaxClockSkew is not recent but a wrong date: taken as recent it
// would keep the session's last turn in flight until that date (year 9999: for ever).
func (p *plan) quiet() bool {
	return p.quietApplies() && p.opts.Now.Sub(p.opts.UpdatedAt) < p.quietPeriod() && !p.updatedInFuture()
}

// quietApplies: the options ask for a quiet period and give the times it needs.
func (p *plan) quietApplies() bool {
	o := p.opts
	return !o.Force && p.quietPeriod() > 0 && !o.Now.IsZero() && !o.UpdatedAt.IsZero()
}

func (p *plan) quietPeriod() time.Duration {
	if p.opts.QuietPeriod == 0 {
		return DefaultQuietPeriod
	}
	return p.opts.QuietPeriod
}

// updatedInFuture: the session's last change is dated beyond MaxClockSkew ahead of Now.
func (p *plan) updatedInFuture() bool {
	return p.opts.UpdatedAt.Sub(p.opts.Now) > MaxClockSkew
}

// openTurn returns the turn whose calls may still be running: the session's last call
// turn, when nothing but results follows it. -1 when there is none.
func (p *plan) openTurn() int {
	last := -1
	for ci := range p.calls {
		if c := &p.calls[ci]; p.part(c.msg, c.part).malformed == wellFormed {
			last = int(c.turn)
		}
	}
	if last < 0 {
		return -1
	}
	for j := int(p.turns[last].last) + 1; j < len(p.msgs); j++ {
		m := &p.msgs[j]
		if m.kind == msgResult {
			continue
		}
		if m.kind != msgUser || len(m.parts()) == 0 {
			return -1
		}
		parts := m.parts()
		for pi := range parts {
			if k := parts[pi].kind; k != partResult && k != partRef {
				return -1 // the user wrote on: the run is over
			}
		}
	}
	return last
}

// decide runs the stages over the pairing and records edits, actions and issues.
func (p *plan) decide() {
	p.unsureOrphan = -1
	p.prepareEdits()

	open := -1
	if p.quiet() {
		open = p.openTurn()
	}

	// Stage order matters only for attribution: every stage acts on the same pairing.
	for ci := range p.calls {
		if p.overMemory() {
			return // refused (checkReport): no need to go on
		}
		c := &p.calls[ci]
		pt := p.part(c.msg, c.part)
		if pt.malformed != wellFormed {
			c.removed = true
			p.removePart(int(c.msg), int(c.part), StageStripMalformedCalls)
			p.act(StageStripMalformedCalls, ActionDrop, int(c.msg), pt, pt.malformed.String())
			p.issue(IssueMalformedCall, int(c.msg), pt, pt.malformed.String())
			continue
		}
		real := 0
		for ri := c.firstRes; ri >= 0; ri = p.results[ri].nextRes {
			if !p.resPart(int(ri)).is(partSynthetic) {
				real++
			}
		}
		if pt.is(partInvalid) && real == 0 {
			// Answering it would give an orphan result to the clients that do not send
			// it (JS ChatOpenAI beside valid calls, ChatAnthropic without its tool_use
			// copy); removing it, with its copies, suits every client.
			c.removed = true
			p.removePart(int(c.msg), int(c.part), StageStripMalformedCalls)
			p.act(StageStripMalformedCalls, ActionDrop, int(c.msg), pt, "invalid tool call (arguments that did not parse) without a result")
			p.issue(IssueMalformedCall, int(c.msg), pt, "invalid tool call without a result")
			continue
		}
		if p.msgs[c.msg].failed && (real == 0 || p.opts.FailedTurns == FailedTurnsStrip) {
			c.removed = true
			p.removePart(int(c.msg), int(c.part), StageFailedTurnCalls)
			if real == 0 {
				p.act(StageFailedTurnCalls, ActionDrop, int(c.msg), pt, "call of a failed or aborted turn without a result")
				p.issue(IssueCallWithoutResult, int(c.msg), pt, "turn ended in error or abort")
			} else {
				p.act(StageFailedTurnCalls, ActionDrop, int(c.msg), pt, "call of a failed or aborted turn (--failed-turns strip)")
				p.issue(IssueFailedTurnCall, int(c.msg), pt, "")
			}
			for ri := c.firstRes; ri >= 0; ri = p.results[ri].nextRes {
				r := &p.results[ri]
				p.removePart(int(r.msg), int(r.part), StageFailedTurnCalls)
				p.act(StageFailedTurnCalls, ActionDrop, int(r.msg), p.resPart(int(ri)), "result of a removed call of a failed turn")
			}
			continue
		}
		if pt.is(partCanonical) {
			p.act(StageNormalizeCallBlocks, ActionRewrite, int(c.msg), pt, "call block rewritten to the canonical toolCall shape")
			p.issue(IssueNoncanonicalCall, int(c.msg), pt, "")
			pt.setRaw(p.ps.canonical(pt))
			pt.idPath = pathOf(pathID)
			p.edits[c.msg].dirty = true
		}
		kept := p.pickKept(c)
		c.kept = int32(kept)
		if kept >= 0 && p.resPart(kept).hasID && isBlank(p.ps.id(p.resPart(kept))) {
			// Paired by position (pair): it takes its call's id, as providers pair by id.
			r, rp := &p.results[kept], p.resPart(kept)
			p.issue(IssueResultWithoutCall, int(r.msg), rp, "blank id")
			p.setPartID(int(r.msg), rp, p.callKey(int32(ci)))
			p.act(StageNormalizeCallIDs, ActionRewrite, int(r.msg), rp,
				fmt.Sprintf("blank id set to that of the only call of message %d without a result", c.msg))
		}
		for r32 := c.firstRes; r32 >= 0; r32 = p.results[r32].nextRes {
			ri := int(r32)
			if ri == kept {
				continue
			}
			r := &p.results[ri]
			p.removePart(int(r.msg), int(r.part), StageDropDuplicateResults)
			detail := "later result for the same call"
			if p.resPart(ri).is(partSynthetic) && !p.resPart(kept).is(partSynthetic) {
				detail = "synthetic result superseded by a real one"
			}
			p.act(StageDropDuplicateResults, ActionDrop, int(r.msg), p.resPart(ri), detail)
			p.issue(IssueDuplicateResult, int(r.msg), p.resPart(ri), "")
		}
		t := &p.turns[c.turn]
		switch {
		case kept >= 0 && p.results[kept].inSlot:
		case kept >= 0:
			r := &p.results[kept]
			p.removePart(int(r.msg), int(r.part), StageMoveResults)
			t.incoming = append(t.incoming, incoming{call: ci, result: kept})
			p.act(StageMoveResults, ActionMove, int(r.msg), p.resPart(kept),
				fmt.Sprintf("to after message %d", t.last))
			p.issue(IssueMisplacedResult, int(r.msg), p.resPart(kept), "")
		case int(c.turn) == open && !p.msgs[c.msg].failed:
			p.report.PendingCalls++
		case pt.is(partAwaiting) && int(c.msg) == len(p.msgs)-1 && !p.opts.Force:
			p.report.PendingCalls++ // a person has yet to approve it
		case pt.callType == callComputer:
			// A computer_call_output must carry a screenshot; none can be made up.
			c.removed = true
			p.removePart(int(c.msg), int(c.part), StageSynthesizeMissingResults)
			p.act(StageSynthesizeMissingResults, ActionDrop, int(c.msg), pt, "computer call without output cannot be answered; call removed")
			p.issue(IssueCallWithoutResult, int(c.msg), pt, "")
		default:
			t.incoming = append(t.incoming, incoming{call: ci, result: -1})
			p.act(StageSynthesizeMissingResults, ActionInsert, int(c.msg), pt, "synthetic error result")
			p.issue(IssueCallWithoutResult, int(c.msg), pt, "")
			if pt.hasID {
				p.suspects[p.callKey(int32(ci))] = true
			}
		}
	}
	for ri := range p.results {
		if p.overMemory() {
			return
		}
		r := &p.results[ri]
		if r.call < 0 {
			p.removePart(int(r.msg), int(r.part), StageDropOrphanResults)
			p.act(StageDropOrphanResults, ActionDrop, int(r.msg), p.resPart(ri), "no call with this id")
			p.issue(IssueResultWithoutCall, int(r.msg), p.resPart(ri), "")
			if pt := p.resPart(ri); pt.hasID {
				p.suspects[strings.TrimSpace(p.ps.id(pt))] = true
			} else if p.unsureOrphan < 0 && p.mayHideID(pt) {
				p.unsureOrphan = ri // its id may be in a member tmend does not read
			}
		}
	}
}

// mayHideID reports whether result part pt, which has no id, may carry one in a member
// tmend does not read.
func (p *plan) mayHideID(pt *part) bool {
	if p.spec.mayHideResultID != nil {
		return p.spec.mayHideResultID(pt.raw(), &p.ps)
	}
	return mayHoldIDKey(pt.raw())
}

func (p *plan) resPart(ri int) *part { r := &p.results[ri]; return p.part(r.msg, r.part) }

// pickKept chooses the result a call keeps: a real one over a synthetic one, and one
// already in place over one that must move.
func (p *plan) pickKept(c *callRef) int {
	best := -1
	score := func(ri int) int {
		s := 0
		if !p.resPart(ri).is(partSynthetic) {
			s += 2
		}
		if p.results[ri].inSlot {
			s++
		}
		return s
	}
	for ri := c.firstRes; ri >= 0; ri = p.results[ri].nextRes {
		if best < 0 || score(int(ri)) > score(best) {
			best = int(ri)
		}
	}
	return best
}

func (p *plan) removePart(msg, pi int, st Stage) {
	e := &p.edits[msg]
	p.removedOf(msg)[pi] = true
	e.dirty = true
	e.stage = stageCodeOf(st)
	if p.msgs[msg].whole() {
		e.drop = true
	}
}

// idKeys are the members in which a block of a shape tmend does not know may carry a
// tool call id, as a set of key codes.
const idKeys = 1<<keyID | 1<<keyCallID | 1<<keyToolCallID | 1<<keyToolUseIDCamel | 1<<keyToolUseID | 1<<keyToolCallIDCamel

// checkUnrecognized refuses the transcript when a block or item that the dialect
// recognises neither as a call nor as a result carries the id of a result about to be
// dropped as an orphan or of a call about to be answered synthetically: it is most likely
// a call (or result) in a shape tmend does not know, and guessing would destroy real
// tool output. The next platform's shapes are refused, not guessed.
func (p *plan) checkUnrecognized() error {
	if p.unsureOrphan >= 0 {
		return p.refuse(int(p.results[p.unsureOrphan].msg), "", "a result without an id tmend knows has an id-like member",
			"so which call it answers is unclear")
	}
	if ri := p.ambiguous; ri >= 0 {
		return p.refuse(int(p.results[ri].msg), "", fmt.Sprintf("a response without an id, outside the turn after its call, may answer any of %d earlier calls of %q without an id or a result",
			p.ambiguousN, p.resPart(ri).name()), "so which call it answers is unclear")
	}
	if ri, ci := p.orphanMayAnswer(); ri >= 0 {
		c := &p.calls[ci]
		return p.refuse(int(p.results[ri].msg), p.ps.id(p.resPart(ri)), fmt.Sprintf(
			"a result tmend would drop as an orphan may answer the unanswered call of message %d (%s)", c.msg, p.mayAnswerWhy(ri, ci)),
			"so which call it answers is unclear")
	}
	if len(p.suspects) == 0 {
		return nil
	}
	defer func() { p.skip = nil }()
	for i := range p.msgs {
		m := &p.msgs[i]
		p.skip = p.ps.knownValues[m.knownFrom:m.knownTo]
		if !m.whole() || shapeless(&p.ps, &m.parts()[0]) {
			if key, id, ok := p.carriesSuspect(m.raw(), m.ms(), MaxDepth, true); ok {
				return p.refuseUnrecognized(i, key, id)
			}
		}
		for k := range blockArrays {
			blks, own := m.arrays.of(k), blockArrays[k] == m.partsKey
			for bi, blk := range blks {
				if own && m.parts()[bi].kind != partOther && !shapeless(&p.ps, &m.parts()[bi]) || p.skipped(blk.raw()) {
					continue
				}
				var key, id string
				var ok bool
				if blk.ms != nil {
					key, id, ok = p.carriesSuspect(blk.raw(), blk.members(), MaxDepth, false)
				} else if blk.raw()[0] == '[' { // an array in the array: look at its objects
					key, id, ok = p.containerCarries(blk.raw(), MaxDepth)
				}
				if ok {
					return p.refuseUnrecognized(i, key, id)
				}
			}
		}
	}
	return nil
}

// shapeless reports a malformed call without a usable id: its shape was not understood
// (a toolUse that is an array, a Responses call with only its item id), so it is searched
// like an unrecognised block.
func shapeless(ps *parser, pt *part) bool {
	return pt.kind == partCall && pt.malformed != wellFormed && !usableID(ps, pt)
}

// orphanMayAnswer finds a real result about to be dropped as an orphan that may still be
// the result of a call left without one: one of the two has no usable id and their tool
// names agree (or the result names none), or their ids differ only where one has a lone
// surrogate (which many decoders read as U+FFFD). It returns the result and the call, or
// -1, -1. Pairing such a result would be a guess, and dropping it would lose it.
func (p *plan) orphanMayAnswer() (int, int) {
	if !slices.ContainsFunc(p.results, func(r resultRef) bool { return r.call < 0 }) {
		return -1, -1
	}
	var open []int // the calls left without a result
	odd := false   // one of them has no usable id, or a lone surrogate in it
	for ci := range p.calls {
		c := &p.calls[ci]
		if pt := p.part(c.msg, c.part); c.kept < 0 && pt.malformed == wellFormed {
			open = append(open, ci)
			odd = odd || !usableID(&p.ps, pt) || !utf8.ValidString(p.ps.id(pt))
		}
	}
	if open == nil {
		return -1, -1
	}
	for ri := range p.results {
		r, rp := &p.results[ri], p.resPart(ri)
		if r.call >= 0 || rp.is(partSynthetic) || usableID(&p.ps, rp) && !odd && utf8.ValidString(p.ps.id(rp)) {
			continue // paired, or an orphan no open call can be confused with
		}
		for _, ci := range open {
			if p.mayAnswerWhy(ri, ci) != "" {
				return ri, ci
			}
		}
	}
	return -1, -1
}

// mayAnswerWhy says why orphan result ri may answer call ci, or "" when it cannot.
func (p *plan) mayAnswerWhy(ri, ci int) string {
	rp, cp := p.resPart(ri), p.part(p.calls[ci].msg, p.calls[ci].part)
	rn, cn := strings.TrimSpace(rp.name()), strings.TrimSpace(cp.name())
	switch {
	case usableID(&p.ps, rp) && usableID(&p.ps, cp):
		if looseID(strings.TrimSpace(p.ps.id(rp))) == looseID(p.callKey(int32(ci))) {
			return "their ids differ only in a lone surrogate"
		}
	case !rp.hasID && !cp.hasID && rp.name() == cp.name():
		// Gemini pairs these by position and name, and so did pair: no other reading.
	case rn == "":
		return "one of them has no id, and the result names no tool"
	case rn == cn:
		return fmt.Sprintf("one of them has no id, and both name the tool %q", cn)
	}
	return ""
}

// usableID reports whether part pt has an id that is not blank.
func usableID(ps *parser, pt *part) bool { return pt.hasID && !isBlank(ps.id(pt)) }

// looseID is id with each lone surrogate (kept by idString as its 3-byte form) read as
// U+FFFD.
func looseID(id string) string {
	if utf8.ValidString(id) {
		return id
	}
	var b strings.Builder
	for i := 0; i < len(id); {
		r, n := utf8.DecodeRuneInString(id[i:])
		if loneSurrogate(id, i) {
			n = 3
		}
		if r == utf8.RuneError {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(id[i : i+n])
		}
		i += n
	}
	return b.String()
}

func isBlockArray(m member) bool {
	return m.code() == keyContent || m.code() == keyToolCalls || m.code() == keyParts
}

// carriesSuspect looks for a suspect id in the members ms of object o: in the value of
// an id-like member holding a string, and in the objects and arrays below the other
// members (but the block arrays whose blocks are walked on their own, when skipBlocks),
// down to depth levels.
func (p *plan) carriesSuspect(o []byte, ms []member, depth int, skipBlocks bool) (key, id string, ok bool) {
	for im := range ms {
		m := &ms[im]
		switch o[m.valStart()] {
		case '"':
			if idKeys>>m.code()&1 == 0 {
				continue
			}
			if s, _ := idString(m.val(o)); p.suspects[strings.TrimSpace(s)] {
				return keyNames[m.code()], s, true
			}
		case '[':
			if skipBlocks && isBlockArray(*m) {
				continue
			}
			fallthrough
		case '{':
			if key, id, ok = p.containerCarries(m.val(o), depth); ok {
				return key, id, ok
			}
		}
	}
	return "", "", false
}

// containerCarries is carriesSuspect for the objects in v (an object, or the objects in
// an array, nested arrays included), depth levels down. An object whose keys cannot be
// read (a key repeated) counts as carrying one: what it holds is unclear. key is then "".
func (p *plan) containerCarries(v []byte, depth int) (key, id string, ok bool) {
	if depth == 0 || !mayHoldIDKey(v) {
		return "", "", false
	}
	p.eachObject(v, func(sub []byte, sms []member, err error) bool {
		if err != nil {
			ok = true
			return false
		}
		key, id, ok = p.carriesSuspect(sub, sms, depth-1, false)
		return !ok
	})
	return key, id, ok
}

// mayHoldIDKey reports whether the object or array v may have a key among idKeys below
// it: every one of them ends in "id" or "Id", unless it is spelled with escapes.
func mayHoldIDKey(v []byte) bool {
	if bytes.IndexByte(v, '\\') >= 0 {
		return true
	}
	for i := 1; ; i += 2 {
		k := bytes.Index(v[i:], []byte(`d"`))
		if k < 0 {
			return false
		}
		if i += k; v[i-1] == 'i' || v[i-1] == 'I' {
			return true
		}
	}
}

// eachObject calls fn with v when it is an object, or with each object in v when it is an
// array (in nested arrays too), until fn returns false, which it then returns. err is
// members' (a repeated key). The members live in the parser's scratch space until fn
// returns.
func (p *plan) eachObject(v []byte, fn func(obj []byte, ms []member, err error) bool) bool {
	if p.skipped(v) {
		return true
	}
	switch v[0] {
	case '{':
		mark := len(p.ps.scratch)
		defer func() { p.ps.scratch = p.ps.scratch[:mark] }()
		ms, err := members(v, &p.ps.scratch)
		return fn(v, ms, err)
	case '[':
		more := true
		eachElement(v, func(e []byte) bool { more = p.eachObject(e, fn); return more })
		return more
	}
	return true
}

// skipped reports whether v is one of the values the dialect recognised in the message
// being searched (message.knownValues): the very bytes, not a copy of them.
func (p *plan) skipped(v []byte) bool {
	for _, k := range p.skip {
		if len(k) == len(v) && len(v) > 0 && &k[0] == &v[0] {
			return true
		}
	}
	return false
}

func (p *plan) refuseUnrecognized(msg int, key, id string) error {
	detail := fmt.Sprintf("a block of a shape tmend does not know carries the id in %q", key)
	if key == "" {
		detail = "a block of a shape tmend does not know repeats a key, so which ids it carries is unclear"
	}
	return p.refuse(msg, id, detail, "the id of a result or call tmend would otherwise drop or answer")
}

// refuse reports the transcript as unsupported, with one unrecognized_tool_call issue,
// and no actions: it is left as it is. why follows detail in the reason, unless empty.
func (p *plan) refuse(msg int, id, detail, why string) error {
	p.report.Actions, p.report.StageCounts, p.report.PendingCalls = nil, nil, 0
	p.report.Issues = []Issue{{Code: IssueUnrecognizedCall, MessageIndex: msg, CallID: strings.Clone(id), Detail: detail}}
	if why == "" {
		return p.fail(StatusUnsupported, "message %d: %s; left untouched", msg, detail)
	}
	return p.fail(StatusUnsupported, "message %d: %s, %s; left untouched", msg, detail, why)
}

// uniqueIDs gives each call that reuses an earlier surviving call's id a new id derived
// from the old one (valid under the same rules, and under the target's when there is one,
// and used nowhere else in the transcript), and the result it keeps follows it.
func (p *plan) uniqueIDs() {
	var used, seen map[string]bool
	for ci := range p.calls {
		c := &p.calls[ci]
		pt := p.part(c.msg, c.part)
		if c.removed || !pt.hasID {
			continue
		}
		key := p.callKey(int32(ci))
		if c.nextSame < 0 && p.firstCallOf(key) == int32(ci) {
			continue // alone with its key
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		if !seen[key] {
			seen[key] = true
			continue
		}
		used = p.renewCallID(c, used)
	}
}

// firstCallOf is the first call of a key that has one.
func (p *plan) firstCallOf(key string) int32 {
	v, _, _ := p.byKey.find(key, p.chainKey)
	return p.chainHead(v)
}

// renewCallID gives call c, which reuses an earlier call's id, a new id derived from the
// old one (valid under the same rules, and under the target's when there is one) that no
// id in used (every id of the transcript, made on first need) has. It returns used.
func (p *plan) renewCallID(c *callRef, used map[string]bool) map[string]bool {
	if used == nil {
		used = p.usedIDs()
	}
	pt := p.part(c.msg, c.part)
	key := strings.TrimSpace(p.ps.id(pt))
	rule, ok := idRules[p.opts.Target]
	if !ok {
		rule = ruleLike(key)
	}
	id := rule.freshID(key, used)
	p.issue(IssueDuplicateCallID, int(c.msg), pt, "")
	p.rewriteCallID(c, StageNormalizeCallIDs, id, fmt.Sprintf("id %q of an earlier call rewritten to %q", p.ps.id(pt), id))
	return used
}

// alignPaddedIDs rewrites the padded side of each pair whose ids are equal only after
// trimming white space to the trimmed id.
func (p *plan) alignPaddedIDs() {
	for ci := range p.calls {
		c := &p.calls[ci]
		pt := p.part(c.msg, c.part)
		if c.removed || c.kept < 0 || !pt.hasID || p.ps.id(p.resPart(int(c.kept))) == p.ps.id(pt) {
			continue
		}
		key := strings.TrimSpace(p.ps.id(pt))
		if p.ps.id(pt) != key {
			p.issue(IssuePaddedCallID, int(c.msg), pt, "")
			p.setPartID(int(c.msg), pt, key)
			p.act(StageNormalizeCallIDs, ActionRewrite, int(c.msg), pt, "white space around the id removed")
		}
		if rp := p.resPart(int(c.kept)); p.ps.id(rp) != key {
			r := &p.results[c.kept]
			p.issue(IssuePaddedCallID, int(r.msg), rp, "")
			p.setPartID(int(r.msg), rp, key)
			p.act(StageNormalizeCallIDs, ActionRewrite, int(r.msg), rp, "white space around the id removed")
		}
	}
}

// usedIDs is every call and result id of the transcript, as written and trimmed.
func (p *plan) usedIDs() map[string]bool {
	used := map[string]bool{}
	for i := range p.msgs {
		parts := p.msgs[i].parts()
		for pi := range parts {
			if pt := &parts[pi]; pt.hasID {
				used[p.ps.id(pt)] = true
				used[strings.TrimSpace(p.ps.id(pt))] = true
			}
		}
	}
	return used
}

// rewriteCallID gives call c the id id, and the result it keeps too.
func (p *plan) rewriteCallID(c *callRef, st Stage, id, detail string) {
	pt := p.part(c.msg, c.part)
	p.act(st, ActionRewrite, int(c.msg), pt, detail)
	p.setPartID(int(c.msg), pt, id) // and so its key (callKey)
	if c.kept >= 0 {
		r := &p.results[c.kept]
		rp := p.resPart(int(c.kept))
		p.setPartID(int(r.msg), rp, id)
		p.act(st, ActionRewrite, int(r.msg), rp, "result follows its call's new id")
	}
}

func (p *plan) setPartID(msg int, pt *part, id string) {
	p.ps.rewriteID(pt, id)
	pt.setRaw(setPath(pt.raw(), pt.idPath.keys(), p.ps.idText(pt)))
	p.edits[msg].dirty = true
}

// finish places incoming results, drops dangling Responses reasoning items, plans the
// merges that removals call for, and sums up the report.
func (p *plan) finish() {
	for ti := range p.turns {
		t := &p.turns[ti]
		if len(t.incoming) == 0 {
			continue
		}
		var raws [][]byte
		for _, in := range t.incoming {
			if in.result >= 0 {
				raws = append(raws, p.resPart(in.result).raw())
			} else {
				c := &p.calls[in.call]
				if p.spec.synthFor != nil {
					raws = append(raws, p.spec.synthFor(&p.msgs[c.msg], p.part(c.msg, c.part), p.ps.idText(p.part(c.msg, c.part)), SyntheticResultText))
				} else {
					raws = append(raws, p.spec.synth(p.part(c.msg, c.part), p.ps.idText(p.part(c.msg, c.part)), SyntheticResultText))
				}
			}
		}
		switch {
		case !p.spec.block:
			p.placeAfter(int(t.slotLast), raws...)
		case t.slotMsg >= 0:
			p.edits[t.slotMsg].dirty = true
			p.placeAfter(int(t.slotMsg), raws...) // parts, placed by rebuild
		default:
			p.placeAfter(int(t.last), p.spec.wrap(raws))
		}
	}
	p.dropDanglingReasoning()
	p.planMerges()

	// Report actions in pipeline order, and issues in transcript order.
	// (slices' generic sorts, not sort.SliceStable, which swaps through reflection.)
	slices.SortStableFunc(p.report.Actions, func(a, b Action) int {
		return cmp.Compare(stageRank[a.Stage], stageRank[b.Stage])
	})
	slices.SortStableFunc(p.report.Issues, func(a, b Issue) int {
		return cmp.Compare(a.MessageIndex, b.MessageIndex)
	})
	counts := map[Stage]int{}
	for _, a := range p.report.Actions {
		counts[a.Stage]++
	}
	if len(counts) > 0 {
		p.report.StageCounts = counts
	}
	if p.quietApplies() && p.updatedInFuture() {
		p.report.Reason = fmt.Sprintf("updated_at %s is more than %s ahead of the clock (%s): "+
			"no call is taken to be still running; fix the writer's clock or the date",
			p.opts.UpdatedAt.Format(time.RFC3339), MaxClockSkew, p.opts.Now.Format(time.RFC3339))
	}
	switch {
	case len(p.report.Actions) > 0:
		p.report.Status = StatusRepaired
	case p.report.PendingCalls > 0:
		p.report.Status = StatusPending
	default:
		p.report.Status = StatusClean
	}
}

// stageRank is each stage's place in Stages.
var stageRank = func() map[Stage]int {
	rank := map[Stage]int{}
	for i, st := range Stages() {
		rank[st] = i
	}
	return rank
}()

// dropDanglingReasoning follows the Responses rule that a reasoning item needs the model
// item it produced after it: one followed by an input item, or by nothing, goes (its
// bytes stay in the saved version and the report). A trailing one of a session that is
// still within its quiet period may still be streaming and is left alone.
func (p *plan) dropDanglingReasoning() {
	// From the end, so that a reasoning item sees whether the one after it stays.
	for i := len(p.msgs) - 1; i >= 0; i-- {
		if !p.msgs[i].reasoning || p.edits[i].drop {
			continue
		}
		next := followsNothing
		for j := i + 1; j < len(p.msgs); j++ {
			if p.msgs[j].reasoning && !p.edits[j].drop {
				// Reasoning items side by side in the input are left as they are; one that
				// lost the item it produced has lost it.
				next = followsModel
				if j > i+1 {
					next = followsInput
				}
				break
			}
			if !p.edits[j].drop {
				next = responsesFollower(&p.msgs[j])
				if p.spec.follower != nil {
					next = p.spec.follower(&p.msgs[j])
				}
				break
			}
			if p.afterAt[j] > 0 {
				next = followsInput // inserted outputs
				break
			}
		}
		if next == followsModel || next == followsNothing && p.quiet() {
			continue
		}
		p.edits[i].drop, p.edits[i].stage = true, stageCodeOf(StageDropDanglingReasoning)
		detail := "reasoning item with no model item after it"
		if next == followsInput {
			detail = "reasoning item followed by an input item, not the model item it produced"
		}
		p.report.Actions = append(p.report.Actions, Action{Stage: StageDropDanglingReasoning, Action: ActionDrop,
			MessageIndex: i, Detail: detail})
		p.report.Issues = append(p.report.Issues, Issue{Code: IssueDanglingReasoning, MessageIndex: i})
	}
}

// gone reports whether message i leaves nothing in the output.
func (p *plan) gone(i int) bool {
	e, m := &p.edits[i], &p.msgs[i]
	if e.drop {
		return true
	}
	if !e.dirty || m.whole() || m.otherContent || p.spec.block && p.turnSlotMsg(i) >= 0 && p.afterAt[i] > 0 {
		return false
	}
	for _, removed := range p.removedOf(i) {
		if !removed {
			return false
		}
	}
	return true
}

// planMerges marks each message that the provider will not accept after the one before
// it (the dialect's mergeAfterRemoval), to be merged into it, where a removal left them
// so: messages between them removed, or one of them lost a call or result (a failed
// turn's text, then the next assistant turn). A merge that would lose a member (the two
// messages hold different values under one key) is not made; in a chain of merges, the
// members of all the messages merged so far count.
func (p *plan) planMerges() {
	p.unmerged = -1
	rule, adjacent := p.spec.mergeAfterRemoval, p.spec.mergeAdjacent
	if rule == nil {
		return
	}
	var prev, cur outMsg // declared once: the rule's pointers make them escape
	have, gap, gapAt := false, false, 0
	prevLost := -1 // prev (or one merged into it) lost a part: its index
	for i := range p.msgs {
		m := &p.msgs[i]
		if p.gone(i) {
			gap, gapAt = true, i
		} else {
			cur = outMsg{raw: m.raw(), role: m.word(keyRole), calls: p.keeps(i, partCall), results: p.keeps(i, partResult)}
			lost := -1
			if p.lostPart(i) {
				lost = i
			}
			at, why := gapAt, "was removed"
			if !gap {
				at, why = max(prevLost, lost), "lost a call or result"
			}
			afterRemoval := have && at >= 0 && rule(&prev, &cur, p.opts.Target)
			oneTurn := have && adjacent != nil && adjacent(&prev, &cur) // the provider rejects the two apart
			side := !afterRemoval && oneTurn
			ok := (afterRemoval || side) && mergeable(prev.raw, m.raw(), m.partsKey)
			if oneTurn && !ok && p.unmerged < 0 {
				p.unmerged, p.unmergedWhy = i, fmt.Sprintf("a %s message follows a %s message, which the provider rejects", cur.role, prev.role)
			}
			if ok {
				p.edits[i].merge = true
				stage := StageMergeTurns
				detail := fmt.Sprintf("merged into the %s message before it, which the provider takes only as one turn", prev.role)
				if afterRemoval {
					stage = p.edits[at].stage.stage()
					detail = fmt.Sprintf("merged into the %s message before it, next to it once message %d %s", cur.role, at, why)
				} else {
					p.report.Issues = append(p.report.Issues, Issue{Code: IssueAdjacentTurns, MessageIndex: i})
				}
				if st := staleStops(prev.raw, m.raw()); st != "" {
					detail += fmt.Sprintf("; it ends the merged message, so %s of the message before it goes", st)
				}
				p.report.Actions = append(p.report.Actions, Action{Stage: stage, Action: ActionMerge,
					MessageIndex: i, Detail: detail})
				prev.raw = merge(prev.raw, m.raw(), m.partsKey) // what the next merge in a chain joins
				prev.calls = prev.calls || cur.calls
				prevLost = max(prevLost, lost)
			} else {
				prev, have, prevLost = cur, true, lost
			}
			gap = false
		}
		if p.spec.block && p.turnSlotMsg(i) < 0 && p.afterAt[i] > 0 {
			prev, have, gap, prevLost = outMsg{raw: p.placedAfter(i)[0], role: []byte("user"), results: true}, true, false, -1
		}
	}
}

// lostPart reports whether message i loses a part and keeps others.
func (p *plan) lostPart(i int) bool {
	return p.edits[i].dirty && slices.Contains(p.removedOf(i), true)
}

// keeps reports whether message i keeps a part of kind k.
func (p *plan) keeps(i int, k partKind) bool {
	parts := p.msgs[i].parts()
	for pi := range parts {
		if parts[pi].kind == k && !p.removedOf(i)[pi] {
			return true
		}
	}
	return false
}

// isStop reports a member that says how the generation of its message ended: the later
// message's stands in a merge (the merged message ends where it did), and prev's goes.
// A failed turn's stop reason kept on the calls of the turn after it would make them
// look failed to the next repair.
func isStop(c keyCode) bool { return c == keyStopReason || c == keyStopReasonSnake }

// staleStops lists prev's stop members (key and value, as written) that cur does not
// repeat: those a merge of cur into prev removes. "" when there are none.
func staleStops(prev, cur []byte) string {
	pms, _ := membersOf(prev)
	cms, _ := membersOf(cur)
	var out []string
	for _, pm := range pms {
		if staleStop(prev, pm, cur, cms) {
			out = append(out, string(pm.key(prev))+": "+string(pm.val(prev)))
		}
	}
	return strings.Join(out, ", ")
}

// staleStop reports whether member pm of prev is a stop member that cur (members cms)
// does not repeat.
func staleStop(prev []byte, pm member, cur []byte, cms []member) bool {
	if !isStop(pm.code()) {
		return false
	}
	cm, ok := findCode(cms, pm.code())
	return !ok || !bytes.Equal(cm.val(cur), pm.val(prev))
}

// mergeable reports whether cur's members other than its parts, role and stop reasons
// can join prev without one being lost: each is absent from prev or the same there.
func mergeable(prev, cur []byte, partsKey keyCode) bool {
	pms, err1 := membersOf(prev)
	cms, err2 := membersOf(cur)
	if err1 != nil || err2 != nil || partsKey == keyOther {
		return false
	}
	if m, ok := findCode(pms, partsKey); !ok || m.val(prev)[0] != '[' {
		return false
	}
	for _, cm := range cms {
		if cm.code() == partsKey || cm.code() == keyRole || isStop(cm.code()) {
			continue
		}
		if pm, ok := findMember(prev, pms, cm.name(cur)); ok && !bytes.Equal(pm.val(prev), cm.val(cur)) {
			return false
		}
	}
	return true
}

// merge returns prev with cur's parts appended to its own, its stop reasons replaced by
// cur's (staleStops), and cur's other members that prev lacks added (mergeable said it
// loses nothing).
func merge(prev, cur []byte, partsKey keyCode) []byte {
	cms, _ := membersOf(cur)
	pms, _ := membersOf(prev)
	for i := 0; i < len(pms); {
		if staleStop(prev, pms[i], cur, cms) {
			prev = removeMember(prev, pms, i)
			pms, _ = membersOf(prev) // rare: read again rather than shift offsets
			continue
		}
		i++
	}
	var parts [][]byte
	pm, _ := findCode(pms, partsKey)
	eachElement(pm.val(prev), func(e []byte) bool { parts = append(parts, e); return true })
	var extra objectBuilder
	for _, cm := range cms {
		switch cm.code() {
		case partsKey:
			eachElement(cm.val(cur), func(e []byte) bool { parts = append(parts, e); return true })
		case keyRole:
		default:
			if _, ok := findMember(prev, pms, cm.name(cur)); !ok {
				extra = extra.member(cm.key(cur), cm.val(cur))
			}
		}
	}
	out := setMember(prev, pm, joinArray(parts))
	if len(extra) > 0 {
		out = append(append(append(out[:len(out)-1:len(out)-1], ','), extra[1:]...), '}')
	}
	return out
}

// assemble builds the repaired message list, in a slice of the plan's: it lives until
// release. Each message says which input message it stands for (-1: a result placed
// after its call) and whether it is that message's bytes as scanned; origins (see
// origin.go) goes on to find the results moved whole.
func (p *plan) assemble() []Origin {
	// Sized once, for every message and every result placed after one: grown by append,
	// they left about four times their size as garbage on a transcript of a million blocks.
	n := len(p.msgs)
	for i := range p.after {
		n += len(p.after[i])
	}
	out := slices.Grow(p.out[:0], n)
	for i := range p.msgs {
		m := &p.msgs[i]
		e := &p.edits[i]
		var raw []byte
		switch {
		case e.drop:
		case m.whole():
			raw = m.parts()[0].raw()
		case e.dirty:
			raw, _ = p.rebuild(i)
		default:
			raw = m.raw()
		}
		switch {
		case raw == nil:
		case e.merge:
			last := &out[len(out)-1]
			last.Msg, last.Changed = merge(last.Msg, raw, m.partsKey), last.Input >= 0
		default:
			// Unchanged when it is the very bytes the message was scanned from.
			same := len(raw) == len(m.raw()) && &raw[0] == &m.raw()[0]
			out = append(out, Origin{Msg: raw, Input: int32(i), Changed: !same})
		}
		if !p.spec.block || p.turnSlotMsg(i) < 0 {
			for _, r := range p.placedAfter(i) {
				out = append(out, Origin{Msg: r, Input: -1})
			}
		}
	}
	p.out = out
	return out
}

// turnSlotMsg returns i when message i is a block slot receiving parts, else -1.
func (p *plan) turnSlotMsg(i int) int {
	if ti := p.slotOf[i]; ti >= 0 && int(p.turns[ti].slotMsg) == i {
		return i
	}
	return -1
}

// rebuild writes message i with its removed parts gone, its parts' current bytes, and
// any incoming results placed after its leading results. ok is false when nothing of the
// message is left.
func (p *plan) rebuild(i int) ([]byte, bool) {
	m := &p.msgs[i]
	removed := p.removedOf(i)
	if p.spec.rebuild != nil {
		return p.spec.rebuild(m, removed, &p.ps)
	}
	var in [][]byte
	if p.spec.block && p.turnSlotMsg(i) >= 0 {
		in = p.placedAfter(i)
	}
	kept := make([][]byte, 0, len(m.parts())+len(in))
	lead := true
	parts := m.parts()
	for pi := range parts {
		pt := &parts[pi]
		if removed[pi] {
			continue
		}
		if lead && pt.kind != partResult {
			kept, in, lead = append(kept, in...), nil, false
		}
		kept = append(kept, pt.raw())
	}
	kept = append(kept, in...)
	if p.spec.inPlace {
		if len(kept) == 0 && !m.otherContent {
			return nil, false
		}
		return p.rebuildInPlace(i, kept), true
	}
	mb, _ := findCode(m.ms(), m.partsKey)
	if len(kept) > 0 {
		return setMember(m.raw(), mb, joinArray(kept)), true
	}
	if !m.otherContent {
		return nil, false
	}
	ms := m.ms()
	for idx := range ms {
		if ms[idx].code() == m.partsKey {
			return removeMember(m.raw(), ms, idx), true
		}
	}
	return m.raw(), true
}
