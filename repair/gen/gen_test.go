package gen

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
)

var cfgStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func generate(t *testing.T, cfg Config) []Session {
	t.Helper()
	var out []Session
	require.NoError(t, Generate(cfg, func(s Session) error { out = append(out, s); return nil }))
	return out
}

func TestGenerateIsDeterministic(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			cfg := Config{Seed: 3, Dialect: d, Sessions: 40, Messages: 30, FaultRate: 0.7, MaxFaults: 4}
			var a, b bytes.Buffer
			for _, s := range generate(t, cfg) {
				WriteJSONL(&a, d, s)
			}
			for _, s := range generate(t, cfg) {
				WriteJSONL(&b, d, s)
			}
			require.Equal(t, a.String(), b.String())
			cfg.Seed = 4
			var c bytes.Buffer
			for _, s := range generate(t, cfg) {
				WriteJSONL(&c, d, s)
			}
			require.NotEqual(t, a.String(), c.String())
		})
	}
}

// TestFaultsAreRecordedOnlyWhenInjected: a session lists a fault only if inject applied
// it, and faults that do not exist in a dialect are never drawn.
func TestFaultsAreRecordedOnlyWhenInjected(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		for _, f := range Faults() {
			ss := generate(t, Config{Seed: 8, Dialect: d, Sessions: 30, Messages: 20, FaultRate: 1, MaxFaults: 1, Faults: []Fault{f}})
			injected := 0
			for _, s := range ss {
				require.Subset(t, []Fault{f}, s.Faults, "%s/%s %s", d, f, s.ID)
				injected += len(s.Faults)
			}
			if Applies(f, d) {
				require.Positive(t, injected, "%s/%s never injected", d, f)
			} else {
				require.Zero(t, injected, "%s/%s does not apply but was recorded", d, f)
				clean := generate(t, Config{Seed: 8, Dialect: d, Sessions: 30, Messages: 20})
				require.Equal(t, clean, ss, "%s/%s: a fault that does not apply must leave sessions clean", d, f)
			}
		}
	}
}

// injected runs conversation and inject until f applies, and returns the events before
// and after.
func injected(t *testing.T, f Fault, d repair.Dialect, seed uint64) (before, after []event) {
	t.Helper()
	for i := range 50 {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		evs := conversation(rng, 20, i, words)
		before = cloneEvents(evs)
		if after, ok := inject(rng, evs, f, d, words); ok {
			return before, after
		}
	}
	t.Fatalf("%s never applied in %s", f, d)
	return nil, nil
}

func cloneEvents(evs []event) []event {
	out := slices.Clone(evs)
	for i := range out {
		out[i].calls = slices.Clone(out[i].calls)
		out[i].results = slices.Clone(out[i].results)
	}
	return out
}

func allCalls(evs []event) []gcall {
	var out []gcall
	for _, e := range evs {
		out = append(out, e.calls...)
	}
	return out
}

func allResults(evs []event) []gresult {
	var out []gresult
	for _, e := range evs {
		out = append(out, e.results...)
	}
	return out
}

func TestPaddedID(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		_, evs := injected(t, FaultPaddedID, repair.Anthropic, seed)
		calls, results := allCalls(evs), allResults(evs)
		padded := 0
		for _, c := range calls {
			for _, r := range results {
				if c.id != r.id && strings.TrimSpace(c.id) == strings.TrimSpace(r.id) {
					padded++
				}
			}
		}
		require.Equal(t, 1, padded, "seed %d: want one pair whose ids differ by whitespace", seed)
	}
}

func TestDuplicateCallID(t *testing.T) {
	t.Parallel()
	for seed := range uint64(20) {
		before, evs := injected(t, FaultDuplicateCallID, repair.OpenAIChat, seed)
		count := map[string]int{}
		for _, c := range allCalls(evs) {
			count[c.id]++
		}
		var dup []string
		for id, n := range count {
			if n > 1 {
				dup = append(dup, id)
			}
		}
		require.Len(t, dup, 1, "seed %d: want one reused id", seed)
		require.Equal(t, 2, count[dup[0]])
		n := 0
		for _, r := range allResults(evs) {
			if r.id == dup[0] {
				n++
			}
		}
		require.Equal(t, 2, n, "seed %d: each of the two calls keeps its own result", seed)
		require.Len(t, allResults(evs), len(allResults(before)), "no result added or lost")
	}
}

func TestNoncanonicalCall(t *testing.T) {
	t.Parallel()
	_, ok := inject(rand.New(rand.NewPCG(1, 1)), conversation(rand.New(rand.NewPCG(1, 2)), 20, 0, words), FaultNoncanonicalCall, repair.Anthropic, words)
	require.False(t, ok, "noncanonical_call is OpenClaw only")

	seen := map[string]bool{}
	for seed := range uint64(40) {
		_, evs := injected(t, FaultNoncanonicalCall, repair.OpenClaw, seed)
		for _, m := range render(repair.OpenClaw, openClaw.render, evs, cfgStart) {
			var msg struct {
				Content []map[string]any `json:"content"`
			}
			require.NoError(t, json.Unmarshal(m, &msg))
			for _, b := range msg.Content {
				typ, _ := b["type"].(string)
				if !slices.Contains([]string{"tool_use", "tool_call", "function_call"}, typ) {
					continue
				}
				key := map[string]string{"tool_use": "id", "tool_call": "tool_call_id", "function_call": "call_id"}[typ]
				require.NotEmpty(t, b[key], "%s carries its id in %s: %v", typ, key, b)
				args, ok := b["input"]
				if !ok {
					args = b["arguments"]
				}
				if s, isString := args.(string); isString {
					require.True(t, json.Valid([]byte(s)), "a JSON-string argument is valid JSON")
					seen[typ+"/string"] = true
				} else {
					require.IsType(t, map[string]any{}, args)
					seen[typ+"/object"] = true
				}
			}
		}
	}
	require.Len(t, seen, 6, "every legacy shape with both argument forms: %v", seen)
}

func TestDanglingReasoning(t *testing.T) {
	t.Parallel()
	atEnd, beforeUser := 0, 0
	for seed := range uint64(30) {
		_, evs := injected(t, FaultDanglingReasoning, repair.OpenAIResponses, seed)
		items := render(repair.OpenAIResponses, openAIResponses.render, evs, cfgStart)
		dangling := 0
		for i, m := range items {
			var it struct{ Type, Role string }
			require.NoError(t, json.Unmarshal(m, &it))
			if it.Type != "reasoning" {
				continue
			}
			if i == len(items)-1 {
				dangling, atEnd = dangling+1, atEnd+1
				continue
			}
			var next struct{ Type, Role string }
			require.NoError(t, json.Unmarshal(items[i+1], &next))
			if next.Type == "message" && next.Role == "user" {
				dangling, beforeUser = dangling+1, beforeUser+1
			}
		}
		require.Equal(t, 1, dangling, "seed %d", seed)
	}
	require.Positive(t, atEnd)
	require.Positive(t, beforeUser)
}

// TestOpenClawCallShapes: clean OpenClaw sessions write calls as toolCall, toolUse and
// functionCall blocks, never as legacy ones.
func TestOpenClawCallShapes(t *testing.T) {
	t.Parallel()
	shapes := map[string]bool{}
	for _, s := range generate(t, Config{Seed: 1, Dialect: repair.OpenClaw, Sessions: 20, Messages: 30}) {
		require.Empty(t, s.Faults)
		for _, m := range s.Messages {
			var msg struct {
				Role    string
				Content []map[string]any
			}
			require.NoError(t, json.Unmarshal(m, &msg))
			for _, b := range msg.Content {
				if typ := b["type"].(string); typ != "text" {
					_, args := b["arguments"]
					_, input := b["input"]
					require.True(t, args != input, "%v has its arguments in exactly one member", b)
					shapes[typ] = true
				}
			}
		}
	}
	require.Equal(t, map[string]bool{"toolCall": true, "toolUse": true, "functionCall": true}, shapes)
}

// TestUnicodeText: TextUnicode sessions hold texts in many scripts, with U+2028 and
// U+2029 written raw (never escaped), and are still valid JSON with the same shape and
// faults as ASCII ones; ASCII sessions hold no non-ASCII byte at all.
func TestUnicodeText(t *testing.T) {
	t.Parallel()
	for _, d := range repair.Dialects() {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			cfg := Config{Seed: 5, Dialect: d, Sessions: 20, Messages: 30, FaultRate: 0.5}
			ascii := generate(t, cfg)
			cfg.Text = TextUnicode
			uni := generate(t, cfg)
			var all bytes.Buffer
			for i, s := range uni {
				require.Equal(t, ascii[i].Faults, s.Faults)
				require.Len(t, s.Messages, len(ascii[i].Messages))
				WriteJSONL(&all, d, s)
			}
			for _, line := range bytes.Split(bytes.TrimSuffix(all.Bytes(), []byte("\n")), []byte("\n")) {
				require.True(t, json.Valid(line), "%s", line)
			}
			out := all.String()
			require.Contains(t, out, "\u2028")
			require.Contains(t, out, "\u2029")
			require.NotContains(t, out, `\u2028`)
			require.NotContains(t, out, `\u2029`)
			for _, w := range []string{"函数", "café", "ошибка", "שלום", "🚀"} {
				require.Contains(t, out, w)
			}
			var plain bytes.Buffer
			for _, s := range ascii {
				WriteJSONL(&plain, d, s)
			}
			for _, c := range plain.Bytes() {
				require.Less(t, c, byte(0x80))
			}
		})
	}
}

func TestRawLineSeparators(t *testing.T) {
	t.Parallel()
	in := `{"a":"x\u2028y\\u2029z\u2029","b":"\"\u00e9"}`
	require.Equal(t, "{\"a\":\"x\u2028y\\\\u2029z\u2029\",\"b\":\"\\\"\\u00e9\"}", string(rawLineSeparators([]byte(in))))
	_, err := ParseText("klingon")
	require.Error(t, err)
}

// TestLangChainVariants: each variant writes its stored form and its chat model's copies
// of the calls, from the same conversation; no variant draws a mix of all three forms.
func TestLangChainVariants(t *testing.T) {
	t.Parallel()
	vs := Variants(repair.LangChain)
	require.Len(t, vs, 12)
	require.Nil(t, Variants(repair.OpenClaw))
	ids := func(ss []Session) []string {
		var out []string
		for _, s := range ss {
			for _, m := range s.Messages {
				out = append(out, regexpCallIDs.FindAllString(string(m), -1)...)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	var first []string
	for _, v := range vs {
		ss := generate(t, Config{Seed: 5, Dialect: repair.LangChain, Variant: v, Sessions: 10, Messages: 20, FaultRate: 0.5})
		form, provider, _ := strings.Cut(v, "-")
		copies := 0
		for _, s := range ss {
			for _, raw := range s.Messages {
				var m map[string]any
				require.NoError(t, json.Unmarshal(raw, &m))
				fields := m
				switch form {
				case "flat":
					require.NotContains(t, m, "data", v)
					require.NotContains(t, m, "lc", v)
				case "data":
					fields = m["data"].(map[string]any)
				case "lc":
					require.Equal(t, "constructor", m["type"], v)
					fields = m["kwargs"].(map[string]any)
				}
				b := string(raw)
				switch provider {
				case "anthropic":
					copies += strings.Count(b, `"type":"tool_use"`)
				case "openai":
					if kw, ok := fields["additional_kwargs"].(map[string]any); ok && kw["tool_calls"] != nil {
						copies++
					}
				case "responses":
					copies += strings.Count(b, `"type":"function_call"`)
				}
			}
		}
		if provider != "" {
			require.Positive(t, copies, "%s: no copies of calls", v)
		}
		if first == nil {
			first = ids(ss)
		} else {
			require.Equal(t, first, ids(ss), "%s: another conversation than the other variants'", v)
		}
	}
	forms := map[string]bool{}
	for _, s := range generate(t, Config{Seed: 6, Dialect: repair.LangChain, Sessions: 60, Messages: 10}) {
		b := string(s.Messages[0])
		switch {
		case strings.Contains(b, `"lc":1`):
			forms["lc"] = true
		case strings.Contains(b, `"data":{`):
			forms["data"] = true
		default:
			forms["flat"] = true
		}
	}
	require.Len(t, forms, 3, "the default draws every form")

	err := Generate(Config{Dialect: repair.LangChain, Variant: "nested", Sessions: 1}, func(Session) error { return nil })
	require.ErrorContains(t, err, `no variant "nested"`)
	err = Generate(Config{Dialect: repair.OpenClaw, Variant: "flat", Sessions: 1}, func(Session) error { return nil })
	require.ErrorContains(t, err, "has one shape")
}

var regexpCallIDs = regexp.MustCompile(`call_\d+_\d+_[0-9a-f]+`)

// TestInvalidCall: the call keeps its name and id, its arguments stop short of JSON, and
// it loses its result.
func TestInvalidCall(t *testing.T) {
	t.Parallel()
	before, after := injected(t, FaultInvalidCall, repair.LangChain, 12)
	var bad *gcall
	for i := range after {
		for j := range after[i].calls {
			if after[i].calls[j].invalid {
				bad = &after[i].calls[j]
			}
		}
	}
	require.NotNil(t, bad)
	require.False(t, json.Valid([]byte(bad.args)), bad.args)
	count := func(evs []event) (n int) {
		for _, e := range evs {
			for _, r := range e.results {
				if r.id == bad.id {
					n++
				}
			}
		}
		return n
	}
	require.Equal(t, 1, count(before))
	require.Zero(t, count(after))
}

// TestOmitIDs: OmitIDs writes Gemini calls and responses without ids, keeps the sessions'
// other bytes and faults (but those that need ids), and is refused where ids are required.
func TestOmitIDs(t *testing.T) {
	t.Parallel()
	cfg := Config{Seed: 6, Dialect: repair.Gemini, Sessions: 40, Messages: 30, FaultRate: 1, MaxFaults: 3, OmitIDs: true}
	faults := map[Fault]bool{}
	for _, s := range generate(t, cfg) {
		for _, f := range s.Faults {
			faults[f] = true
		}
		for _, m := range s.Messages {
			require.NotContains(t, string(m), `"id"`)
		}
	}
	require.NotContains(t, faults, FaultPaddedID)
	require.NotContains(t, faults, FaultDuplicateCallID)
	require.Contains(t, faults, FaultMisplacedResult)
	require.Error(t, Generate(Config{Dialect: repair.OpenAIChat, Sessions: 1, OmitIDs: true}, func(Session) error { return nil }))
}
