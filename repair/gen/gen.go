// Package gen generates realistic agent sessions in any dialect, with the faults tmend
// repairs injected at a chosen rate. Output depends only on the Config: the same seed
// gives the same bytes.
package gen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tmend/tmend/repair"
)

// Fault is a kind of damage the generator can inject.
type Fault string

// The faults, one per repair stage and shape.
const (
	FaultMissingResult     Fault = "missing_result"      // a call mid-session never got its result
	FaultInterrupted       Fault = "interrupted"         // the last turn's calls have no results
	FaultMisplacedResult   Fault = "misplaced_result"    // a result arrived after the next user message
	FaultDuplicateResult   Fault = "duplicate_result"    // a result was appended twice
	FaultSyntheticThenReal Fault = "synthetic_then_real" // another repairer answered, then the real result came
	FaultOrphanResult      Fault = "orphan_result"       // a result for a call that is not there
	FaultMalformedCall     Fault = "malformed_call"      // blank id, streaming leftover, no name or no arguments
	FaultFailedTurn        Fault = "failed_turn"         // a turn ended in error with calls and no results
	// One side of a call/result pair has surrounding whitespace in its id (" call_7",
	// "toolu_x\t"); the other side does not.
	FaultPaddedID Fault = "padded_id"
	// A later call reuses an earlier call's id (in a later turn or the same one), with its
	// own result.
	FaultDuplicateCallID Fault = "duplicate_call_id"
	// OpenClaw only: a call written as a legacy snake_case block (tool_use, tool_call or
	// function_call; id in id, tool_call_id or call_id; arguments as an object or a JSON
	// string), which the platform's runtime accepts and the providers do not.
	FaultNoncanonicalCall Fault = "noncanonical_call"
	// OpenAI Responses only: a reasoning item with no model item after it, at the end of
	// the session (a cut-off turn) or right before a user message.
	FaultDanglingReasoning Fault = "dangling_reasoning"
	// LangChain only: a call whose arguments did not parse, which LangChain keeps in
	// invalid_tool_calls (and langchain-openai still sends), left without a result because
	// agents run only tool_calls.
	FaultInvalidCall Fault = "invalid_call"
	// In-place dialects only (a call and its result in one part): a retry stored an
	// assistant message twice, the copy repeating its calls with no result of its own.
	FaultRetryDuplicate Fault = "retry_duplicate"
)

// Faults lists every fault kind.
func Faults() []Fault {
	return []Fault{FaultMissingResult, FaultInterrupted, FaultMisplacedResult, FaultDuplicateResult,
		FaultSyntheticThenReal, FaultOrphanResult, FaultMalformedCall, FaultFailedTurn,
		FaultPaddedID, FaultDuplicateCallID, FaultNoncanonicalCall, FaultDanglingReasoning, FaultRetryDuplicate,
		FaultInvalidCall}
}

// FaultList is Faults as a comma-separated list, for help and messages.
func FaultList() string {
	names := make([]string, len(Faults()))
	for i, f := range Faults() {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// Applies reports whether fault f exists in dialect d. Generate draws only faults that
// apply, so asking for one that does not gives clean sessions.
func Applies(f Fault, d repair.Dialect) bool {
	switch f {
	case FaultNoncanonicalCall:
		return dialectOf(d).legacyBlocks
	case FaultDanglingReasoning:
		return dialectOf(d).reasoning
	case FaultMisplacedResult, FaultDuplicateResult, FaultSyntheticThenReal, FaultOrphanResult, FaultPaddedID:
		// A call and its result in one part cannot be apart, twice, or padded apart.
		return dialectOf(d).renderAll == nil
	case FaultFailedTurn:
		return !dialectOf(d).noTurnEnd && dialectOf(d).renderAll == nil
	case FaultRetryDuplicate:
		return dialectOf(d).renderAll != nil
	case FaultInvalidCall:
		return dialectOf(d).invalidCalls
	}
	return true
}

// Variants lists the stored shapes dialect d is written in, for Config.Variant; nil when
// it has one shape. LangChain's are its stored form (flat, data, lc), alone or with a
// chat model's copies of each call (-anthropic, -openai, -responses).
func Variants(d repair.Dialect) []string { return dialectOf(d).variants }

// ParseFaults accepts "all" or a comma-separated list of fault names.
func ParseFaults(s string) ([]Fault, error) {
	if s == "" || s == "all" {
		return Faults(), nil
	}
	var out []Fault
	for _, name := range strings.Split(s, ",") {
		found := false
		for _, f := range Faults() {
			if string(f) == strings.TrimSpace(name) {
				out, found = append(out, f), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown fault %q (want all, or some of %s)", name, FaultList())
		}
	}
	return out, nil
}

// Config says what to generate.
type Config struct {
	Seed     uint64
	Dialect  repair.Dialect
	Sessions int
	// Messages is the mean message count; counts spread uniformly over [Messages/2, 3*Messages/2].
	Messages int
	// FaultRate is the share of sessions with faults (0..1); each broken one gets 1 to
	// MaxFaults faults drawn from those of Faults that apply to Dialect (see Applies).
	FaultRate float64
	Faults    []Fault
	MaxFaults int
	// Start is the updated_at of the first session; later ones are a few seconds apart.
	Start time.Time
	// Text is the vocabulary of message and result texts; "" is TextASCII.
	Text Text
	// Variant is the stored shape to write, one of Variants(Dialect); "" draws one per
	// session (for dialects with several).
	Variant string
	// OmitIDs writes calls and results without ids, as many SDKs do where the dialect makes
	// them optional (see IDsOptional); faults that need ids are then not drawn, and a
	// malformed call loses its name instead of its id.
	OmitIDs bool
	// Workload is the kind of tool traffic (WorkloadPlain when "").
	Workload Workload
}

// Text names the vocabulary that message and result texts are drawn from.
type Text string

const (
	// TextASCII is plain English words (the default; existing corpora and golden inputs
	// depend on its bytes).
	TextASCII Text = "ascii"
	// TextUnicode mixes in words in many scripts: CJK, accented Latin, Cyrillic, Greek,
	// Devanagari, right-to-left Hebrew and Arabic, emoji (with ZWJ sequences), and words
	// holding U+2028 LINE SEPARATOR or U+2029 PARAGRAPH SEPARATOR. Everything is written
	// as raw UTF-8, never \u-escaped, so parsers meet the bytes as real sessions hold them.
	TextUnicode Text = "unicode"
)

// Texts lists every vocabulary.
func Texts() []Text { return []Text{TextASCII, TextUnicode} }

// ParseText accepts a vocabulary name as listed by Texts; "" is TextASCII.
func ParseText(s string) (Text, error) {
	if s == "" {
		return TextASCII, nil
	}
	for _, t := range Texts() {
		if string(t) == s {
			return t, nil
		}
	}
	return "", fmt.Errorf("unknown text %q (want one of %v)", s, Texts())
}

// Session is one generated session.
type Session struct {
	ID        string
	UpdatedAt time.Time
	Messages  []json.RawMessage
	Faults    []Fault
}

// Generate calls fn for each session in order.
func Generate(cfg Config, fn func(Session) error) error {
	if cfg.Messages < 4 {
		cfg.Messages = 4
	}
	if cfg.MaxFaults < 1 {
		cfg.MaxFaults = 2
	}
	if len(cfg.Faults) == 0 {
		cfg.Faults = Faults()
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	vocab := words
	switch cfg.Text {
	case "", TextASCII:
	case TextUnicode:
		vocab = unicodeWords
	default:
		return fmt.Errorf("gen: unknown text %q", cfg.Text)
	}
	dl := dialectOf(cfg.Dialect)
	if cfg.Variant != "" && !slices.Contains(dl.variants, cfg.Variant) {
		if len(dl.variants) == 0 {
			return fmt.Errorf("gen: dialect %s has one shape, no variant %q", cfg.Dialect, cfg.Variant)
		}
		return fmt.Errorf("gen: dialect %s has no variant %q (want one of %s)", cfg.Dialect, cfg.Variant,
			strings.Join(dl.variants, ", "))
	}
	if cfg.OmitIDs && !IDsOptional(cfg.Dialect) {
		return fmt.Errorf("gen: %s calls need ids", cfg.Dialect)
	}
	var faults []Fault
	for _, f := range cfg.Faults {
		if Applies(f, cfg.Dialect) && !(cfg.OmitIDs && (f == FaultPaddedID || f == FaultDuplicateCallID)) {
			faults = append(faults, f)
		}
	}
	for i := 0; i < cfg.Sessions; i++ {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		s := Session{
			ID:        fmt.Sprintf("s-%06d", i),
			UpdatedAt: cfg.Start.Add(time.Duration(i) * 3 * time.Second),
		}
		conv := conversation(rng, cfg.Messages/2+rng.IntN(cfg.Messages+1), i, vocab)
		switch cfg.Workload {
		case WorkloadPlain:
		case WorkloadCoding:
			// Its own stream, so that faults and variants are drawn as for plain sessions.
			coding(rand.New(rand.NewPCG(cfg.Seed^0x636f64696e67, uint64(i))), conv)
		default:
			return fmt.Errorf("gen: unknown workload %q", cfg.Workload)
		}
		if rng.Float64() < cfg.FaultRate && len(faults) > 0 {
			n := 1 + rng.IntN(cfg.MaxFaults)
			for range n {
				f := faults[rng.IntN(len(faults))]
				var ok bool
				if conv, ok = inject(rng, conv, f, cfg.Dialect, vocab); ok {
					s.Faults = append(s.Faults, f)
				}
			}
		}
		if cfg.OmitIDs {
			omitIDs(conv)
		}
		r := dl.render
		if len(dl.variants) > 0 {
			// Drawn last, so that the conversation and its faults are those of any variant.
			v := cfg.Variant
			if v == "" {
				v = dl.variants[rng.IntN(len(dl.variants))]
			}
			r = dl.variant(v)
		}
		s.Messages = render(cfg.Dialect, r, conv, cfg.Start.Add(time.Duration(i)*3*time.Second))
		if cfg.Text == TextUnicode {
			for j, m := range s.Messages {
				s.Messages[j] = rawLineSeparators(m)
			}
		}
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

// IDsOptional reports whether calls and results of dialect d may carry no ids (Config.OmitIDs).
func IDsOptional(d repair.Dialect) bool { return dialectOf(d).idsOptional }

// omitIDs drops every id of evs; a call without an id cannot have a blank one, so a
// blank_id call loses its name instead.
func omitIDs(evs []event) {
	for i := range evs {
		for j := range evs[i].calls {
			c := &evs[i].calls[j]
			if c.id = ""; c.malformed == "blank_id" {
				c.malformed = "no_name"
			}
		}
		for j := range evs[i].results {
			evs[i].results[j].id = ""
		}
	}
}

// Summary counts what WriteJSONLines wrote.
type Summary struct {
	Sessions int `json:"sessions"`
	// Broken is how many sessions got at least one fault; ByFault counts the faults.
	Broken  int           `json:"broken"`
	ByFault map[Fault]int `json:"by_fault"`
}

// WriteJSONLines generates cfg's sessions and writes them to w as JSON Lines, stopping
// early when ctx ends, and returns what it wrote.
func WriteJSONLines(ctx context.Context, w io.Writer, cfg Config) (Summary, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	var line bytes.Buffer
	sum := Summary{ByFault: map[Fault]int{}}
	err := Generate(cfg, func(s Session) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		line.Reset()
		WriteJSONL(&line, cfg.Dialect, s)
		if _, err := bw.Write(line.Bytes()); err != nil {
			return err
		}
		sum.Sessions++
		if len(s.Faults) > 0 {
			sum.Broken++
		}
		for _, f := range s.Faults {
			sum.ByFault[f]++
		}
		return nil
	})
	if err != nil {
		return sum, err
	}
	return sum, bw.Flush()
}

// WriteJSONL writes a session as one JSON Lines record.
func WriteJSONL(w *bytes.Buffer, d repair.Dialect, s Session) {
	w.WriteString(`{"id":`)
	w.Write(quote(s.ID))
	w.WriteString(`,"updated_at":`)
	w.Write(quote(s.UpdatedAt.UTC().Format(time.RFC3339)))
	w.WriteString(`,"` + d.EnvelopeKey() + `":[`)
	for i, m := range s.Messages {
		if i > 0 {
			w.WriteByte(',')
		}
		w.Write(m)
	}
	w.WriteString("]}\n")
}

func quote(s string) []byte { b, _ := json.Marshal(s); return b }

// --- the abstract conversation ---

type evKind int

const (
	evUser evKind = iota
	evAssistant
	evResults
)

type gcall struct {
	id, name, args string
	malformed      string // "", "blank_id", "partial", "no_name", "no_args"
	legacy         *legacyShape
	invalid        bool // args is JSON cut short (invalid_call)
}

// legacyShape is a non-canonical block a platform writes a call as (noncanonical_call).
type legacyShape struct {
	typ, idKey, argsKey string
	argsAsString        bool
}

// legacyShapes are OpenClaw's snake_case call blocks, each with the id member it uses.
var legacyShapes = []legacyShape{{typ: "tool_use", idKey: "id"}, {typ: "tool_call", idKey: "tool_call_id"},
	{typ: "function_call", idKey: "call_id"}}

type gresult struct {
	id, name, text string
	synthetic      bool
	failed         bool // the tool reported an error (WorkloadCoding)
}

type event struct {
	kind    evKind
	text    string
	calls   []gcall
	results []gresult
	failed  bool
	// reasoningOnly: a model turn cut off after its reasoning (dangling_reasoning).
	reasoningOnly bool
}

var tools = []string{"read_file", "write_file", "bash", "search_web", "list_dir", "grep", "edit_file", "fetch_url"}

var words = strings.Fields(`the a to of and in is it for on that with as this be are was by at file line
function test error result value build config server request session user agent model call tool data
run output input path module change fix update check query table index cache log trace retry timeout`)

// unicodeWords is TextUnicode's vocabulary: about two thirds of it non-ASCII, in
// one-, two-, three- and four-byte UTF-8, with U+2028 and U+2029 inside some words
// (added apart: strings.Fields would split at them, as they are white space).
var unicodeWords = append(strings.Fields(`the file error result value build session user tool call data run output
函数 错误 文件 配置 服务器 请求 会话 用户 日本語 テスト 結果 한국어 오류 파일
café naïve résumé Größe façade señal ação über Straße łódź český żółw crème brûlée
ошибка файл запрос сервер λάθος αρχείο नमस्ते फ़ाइल
שלום קובץ שגיאה مرحبا ملف خطأ طلب
🚀 🔧 ✅ 🙂 👩‍💻 🇩🇪 ⚠️ 📁`), "line\u2028break", "para\u2029graph", "行\u2028末", "end\u2029", "\u2028start")

// rawLineSeparators returns the JSON text m with its \u2028 and \u2029 escapes (which
// encoding/json always writes) replaced by the raw characters, as other JSON writers
// (JavaScript's JSON.stringify among them) leave them.
func rawLineSeparators(m []byte) []byte {
	if !bytes.Contains(m, []byte(`\u202`)) {
		return m
	}
	out := make([]byte, 0, len(m))
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		// An escape: a \u2028 or \u2029 becomes raw, any other is copied whole so that
		// an escaped backslash followed by "u2028" is left alone.
		switch {
		case m[i+1] == 'u' && (string(m[i+2:i+6]) == "2028" || string(m[i+2:i+6]) == "2029"):
			out = append(out, 0xE2, 0x80, 0xA8+m[i+5]-'8')
			i += 5
		default:
			out = append(out, c, m[i+1])
			i++
		}
	}
	return out
}

func sentence(rng *rand.Rand, words []string, min, max int) string {
	n := min + rng.IntN(max-min+1)
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[rng.IntN(len(words))])
	}
	return b.String()
}

// conversation builds a clean session of about n messages: user asks, the assistant
// calls tools over a few turns, results come back, the assistant answers.
func conversation(rng *rand.Rand, n, session int, vocab []string) []event {
	var evs []event
	callN := 0
	count := 0
	for count < n {
		evs = append(evs, event{kind: evUser, text: sentence(rng, vocab, 4, 20)})
		count++
		for steps := 1 + rng.IntN(4); steps > 0 && count < n; steps-- {
			k := 1 + rng.IntN(3)
			if rng.IntN(3) > 0 {
				k = 1
			}
			a := event{kind: evAssistant, text: sentence(rng, vocab, 0, 10)}
			r := event{kind: evResults}
			for j := 0; j < k; j++ {
				callN++
				name := tools[rng.IntN(len(tools))]
				id := fmt.Sprintf("call_%d_%d_%x", session, callN, rng.Uint32())
				args := fmt.Sprintf(`{"path":"/src/%s.go","line":%d,"limit":1.5e3}`, words[rng.IntN(len(words))], rng.IntN(900))
				a.calls = append(a.calls, gcall{id: id, name: name, args: args})
				r.results = append(r.results, gresult{id: id, name: name, text: sentence(rng, vocab, 3, 25)})
			}
			evs = append(evs, a, r)
			count += 1 + k
		}
		evs = append(evs, event{kind: evAssistant, text: sentence(rng, vocab, 5, 25)})
		count++
	}
	return evs
}

// callTurns returns the indexes of assistant events with calls that are followed by
// their results event.
func callTurns(evs []event) []int {
	var out []int
	for i := 0; i+1 < len(evs); i++ {
		if evs[i].kind == evAssistant && len(evs[i].calls) > 0 && evs[i+1].kind == evResults {
			out = append(out, i)
		}
	}
	return out
}

// inject damages evs with fault f and reports whether it did: a fault that does not
// apply to the dialect or finds nothing to damage leaves evs as they are.
func inject(rng *rand.Rand, evs []event, f Fault, d repair.Dialect, vocab []string) ([]event, bool) {
	turns := callTurns(evs)
	if len(turns) == 0 || !Applies(f, d) {
		return evs, false
	}
	t := turns[rng.IntN(len(turns))]
	res := &evs[t+1]
	if len(res.results) == 0 {
		return evs, false
	}
	k := rng.IntN(len(res.results))
	switch f {
	case FaultMissingResult:
		res.results = append(res.results[:k:k], res.results[k+1:]...)
	case FaultInterrupted:
		last := turns[len(turns)-1]
		// Cut the session right after the last call turn: the run died mid-tool.
		evs = evs[:last+1]
	case FaultMisplacedResult:
		if t+2 == len(evs) {
			return evs, false // nothing after the turn for the result to land behind
		}
		moved := res.results[k]
		res.results = append(res.results[:k:k], res.results[k+1:]...)
		// The result lands after the next user message.
		for j := t + 2; j < len(evs); j++ {
			if evs[j].kind == evUser {
				return insertEv(evs, j+1, event{kind: evResults, results: []gresult{moved}}), true
			}
		}
		evs = append(evs, event{kind: evResults, results: []gresult{moved}})
	case FaultDuplicateResult:
		res.results = append(res.results, res.results[k])
	case FaultSyntheticThenReal:
		real := res.results[k]
		res.results[k] = gresult{id: real.id, name: real.name, synthetic: true,
			text: "[openclaw] missing tool result in session history; inserted synthetic error result for transcript repair."}
		evs = insertEv(evs, t+2, event{kind: evResults, results: []gresult{real}})
	case FaultOrphanResult:
		res.results = append(res.results, gresult{id: fmt.Sprintf("call_orphan_%x", rng.Uint32()),
			name: "bash", text: sentence(rng, vocab, 3, 10)})
	case FaultMalformedCall:
		kinds := []string{"blank_id", "partial", "no_name", "no_args"}
		c := &evs[t].calls[rng.IntN(len(evs[t].calls))]
		c.malformed = kinds[rng.IntN(len(kinds))]
		if dialectOf(d).argsOptional && (c.malformed == "partial" || c.malformed == "no_args") {
			c.malformed = "blank_id" // Gemini has no partial shape, and args are optional there
		}
	case FaultFailedTurn:
		evs[t].failed = true
		evs = append(evs[:t+1:t+1], evs[t+2:]...)
	case FaultPaddedID:
		r := &res.results[k]
		c := findCall(evs[t].calls, r.id)
		if c == nil || strings.TrimSpace(r.id) != r.id {
			return evs, false
		}
		pads := [][2]string{{" ", ""}, {"", " "}, {"", "\t"}, {" ", " "}, {"\n", ""}}
		p := pads[rng.IntN(len(pads))]
		if rng.IntN(2) == 0 {
			c.id = p[0] + c.id + p[1]
		} else {
			r.id = p[0] + r.id + p[1]
		}
	case FaultDuplicateCallID:
		return duplicateCallID(rng, evs, t, res.results[k].id)
	case FaultRetryDuplicate:
		dup := evs[t]
		dup.calls = slices.Clone(dup.calls)
		return insertEv(evs, t+1, dup), true
	case FaultNoncanonicalCall:
		c := &evs[t].calls[rng.IntN(len(evs[t].calls))]
		if c.legacy != nil {
			return evs, false
		}
		shape := legacyShapes[rng.IntN(len(legacyShapes))]
		shape.argsKey = []string{"input", "arguments"}[rng.IntN(2)]
		shape.argsAsString = rng.IntN(2) == 0
		c.legacy = &shape
	case FaultInvalidCall:
		c := findCall(evs[t].calls, res.results[k].id)
		if c == nil || c.invalid || c.malformed != "" {
			return evs, false
		}
		// The model's arguments stopped short (max_tokens, a cut stream): not JSON.
		c.invalid, c.args = true, c.args[:len(c.args)/2]
		res.results = append(res.results[:k:k], res.results[k+1:]...)
	case FaultDanglingReasoning:
		var users []int
		for j := 1; j < len(evs); j++ {
			if evs[j].kind == evUser {
				users = append(users, j)
			}
		}
		cut := event{kind: evAssistant, reasoningOnly: true}
		if rng.IntN(2) == 0 || len(users) == 0 {
			return append(evs, cut), true
		}
		return insertEv(evs, users[rng.IntN(len(users))], cut), true
	}
	return evs, true
}

func findCall(calls []gcall, id string) *gcall {
	for j := range calls {
		if calls[j].id == id {
			return &calls[j]
		}
	}
	return nil
}

// duplicateCallID gives the call of turn t that id answers the id of a call before it (in
// an earlier turn, or earlier in the same turn); its results take the reused id too.
func duplicateCallID(rng *rand.Rand, evs []event, t int, id string) ([]event, bool) {
	var earlier []string
	for i := 0; i <= t; i++ {
		if evs[i].kind != evAssistant {
			continue
		}
		for _, c := range evs[i].calls {
			if i == t && c.id == id {
				break
			}
			if c.id != id {
				earlier = append(earlier, c.id)
			}
		}
	}
	if findCall(evs[t].calls, id) == nil || len(earlier) == 0 {
		return evs, false
	}
	reused := earlier[rng.IntN(len(earlier))]
	findCall(evs[t].calls, id).id = reused
	for i := t + 1; i < len(evs); i++ {
		for j := range evs[i].results {
			if evs[i].results[j].id == id {
				evs[i].results[j].id = reused
			}
		}
	}
	return evs, true
}

func insertEv(evs []event, at int, e event) []event {
	evs = append(evs, event{})
	copy(evs[at+1:], evs[at:])
	evs[at] = e
	return evs
}
