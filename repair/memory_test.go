package repair

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// denseBlocks is an Anthropic transcript of n calls in one assistant message, answered
// (all but every thousandth) in the next: many small blocks, the engine's costliest
// input per byte.
func denseBlocks(n int) []byte {
	out := []byte(`[{"role":"user","content":"go"},{"role":"assistant","content":[`)
	for i := range n {
		if i > 0 {
			out = append(out, ',')
		}
		out = fmt.Appendf(out, `{"type":"tool_use","id":"t%d","name":"f","input":{}}`, i)
	}
	out = append(out, `]},{"role":"user","content":[`...)
	for i := range n {
		if i%1000 == 999 {
			continue
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = fmt.Appendf(out, `{"type":"tool_result","tool_use_id":"t%d","content":"ok"}`, i)
	}
	return append(out, `]}]`...)
}

// denseMessages is an OpenAI chat transcript of n one-call turns, each answered by a tool
// message but every thousandth: a part per message.
func denseMessages(n int) []byte {
	out := []byte(`[{"role":"user","content":"go"}`)
	for i := range n {
		out = fmt.Appendf(out, `,{"role":"assistant","tool_calls":[{"id":"c%d","type":"function","function":{"name":"f","arguments":"{}"}}]}`, i)
		if i%1000 != 999 {
			out = fmt.Appendf(out, `,{"role":"tool","tool_call_id":"c%d","content":"ok"}`, i)
		}
	}
	return append(out, ']')
}

// unanswered is an Anthropic transcript of n calls in one assistant message, none of
// them answered: each gives the report an action and an issue.
func unanswered(n int) []byte {
	out := []byte(`[{"role":"user","content":"go"},{"role":"assistant","content":[`)
	for i := range n {
		if i > 0 {
			out = append(out, ',')
		}
		out = fmt.Appendf(out, `{"type":"tool_use","id":"t%d","name":"f","input":{}}`, i)
	}
	return append(out, `]}]`...)
}

// Ids read from the input are kept as offsets into it, not copied: only escaped or
// rewritten ones take room of their own.
func TestInputIDsTakeNoRoom(t *testing.T) {
	t.Parallel()
	p, err := newPlan(denseBlocks(1000), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.release()
	if n := len(p.ps.idTexts) + len(p.ps.idStrs); n != 0 {
		t.Fatalf("%d ids of the input kept apart from it, want 0", n)
	}
}

// The report counts toward MaxMemory: a transcript whose records fit the bound but
// whose report of a fault per call does not is refused as too_large, unchanged.
func TestReportCountsTowardMaxMemory(t *testing.T) {
	t.Parallel()
	in := unanswered(20_000)
	p, err := newPlan(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	records := p.sc.workingSet()
	p.release()

	limit := records + records/4
	res, err := Repair(in, Options{MaxMemory: limit})
	var ue *UnrepairableError
	if !errors.As(err, &ue) || res.Report.Status != StatusTooLarge {
		t.Fatalf("records of %d bytes under a %d-byte bound, report over it: got %v, status %s; want too_large", records, limit, err, res.Report.Status)
	}
	if !bytes.Equal(res.Messages, in) || len(res.Report.Actions) != 0 || len(res.Report.Issues) != 0 {
		t.Fatalf("refused transcript changed or reported: %d actions, %d issues", len(res.Report.Actions), len(res.Report.Issues))
	}
	t.Log(res.Report.Reason)
	if res, err := Repair(in, Options{MaxMemory: 1 << 30}); err != nil || res.Report.Status != StatusRepaired {
		t.Fatalf("under a large bound: %v, %s", err, res.Report.Status)
	}
}

// A transcript over MaxMemory is refused as too_large and comes back unchanged; under
// it, the repair is the same as without a bound.
func TestMaxMemoryRefuses(t *testing.T) {
	t.Parallel()
	for name, in := range map[string][]byte{"Blocks": denseBlocks(20_000), "Messages": denseMessages(10_000)} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			free, err := Repair(in, Options{})
			if err != nil || free.Report.Status != StatusRepaired {
				t.Fatalf("without a bound: %v, %s", err, free.Report.Status)
			}
			bounded, err := Repair(in, Options{MaxMemory: 1 << 30})
			if err != nil || !bytes.Equal(bounded.Messages, free.Messages) {
				t.Fatalf("under the bound: %v, output differs: %t", err, !bytes.Equal(bounded.Messages, free.Messages))
			}

			res, err := Repair(in, Options{MaxMemory: 1 << 20})
			var ue *UnrepairableError
			if !errors.As(err, &ue) || ue.Status != StatusTooLarge || res.Report.Status != StatusTooLarge {
				t.Fatalf("over the bound: got %v, status %s; want a too_large refusal", err, res.Report.Status)
			}
			if !bytes.Equal(res.Messages, in) || len(res.Report.Actions) != 0 {
				t.Fatalf("refused transcript changed: %d actions", len(res.Report.Actions))
			}
			t.Log(res.Report.Reason)

			_, rep, err := ValidateDocument(in, Options{MaxMemory: 1 << 20})
			if !errors.As(err, &ue) || rep.Status != StatusTooLarge {
				t.Fatalf("validate over the bound: got %v, status %s", err, rep.Status)
			}
		})
	}
}

// The working set the engine bounds by (workingSet) is at least what it holds: the live
// heap of an analysed plan, measured, with few faults (the report grows with them, and
// is not counted). It is not run in parallel, so that nothing else
// allocates while the heap is measured.
func TestWorkingSetErrsHigh(t *testing.T) {
	for name, in := range map[string][]byte{"Blocks": denseBlocks(100_000), "Messages": denseMessages(50_000)} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.GC() // twice: pooled plans go on the second
			runtime.ReadMemStats(&before)
			p, err := newPlan(in, Options{})
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			live, est := int64(after.HeapAlloc)-int64(before.HeapAlloc), p.sc.workingSet()
			p.release()
			t.Logf("live %d bytes, estimate %d (%.2fx), input %d", live, est, float64(est)/float64(live), len(in))
			if est < live || est > 2*live {
				t.Fatalf("estimate %d bytes for a live heap of %d: want between 1 and 2 times it", est, live)
			}
		})
	}
}

// A message's record and edit, one of each a message: a LangChain session keeps a
// message a tool call or result, so they weigh like a block's. The record holds its
// bytes, members and parts as pointers and lengths: 562k messages took 40 bytes more
// each as slices.
func TestMessageSize(t *testing.T) {
	if n := unsafe.Sizeof(message{}); n != 64 {
		t.Fatalf("message is %d bytes, want 64", n)
	}
	if n := unsafe.Sizeof(edit{}); n != 8 {
		t.Fatalf("edit is %d bytes, want 8", n)
	}
}

// A message's accessors give back the slices it was set to, capped at their length (so
// that nothing appended through them overwrites the slab after them), and where its
// bytes start in the input.
func TestMessageSlicesAreTheSlicesSet(t *testing.T) {
	in := []byte(`[{"role":"user","content":"hi"}]`)
	ms, parts := make([]member, 2, 8), make([]part, 3, 8)
	var m message
	m.setRaw(in[1 : len(in)-1])
	m.setMembers(ms)
	m.setParts(parts)
	if got := m.raw(); &got[0] != &in[1] || len(got) != len(in)-2 || cap(got) != len(got) {
		t.Errorf("raw() is %d bytes (cap %d) at %p, want %d at %p", len(got), cap(got), &got[0], len(in)-2, &in[1])
	}
	if got := m.ms(); &got[0] != &ms[0] || len(got) != 2 || cap(got) != 2 {
		t.Errorf("ms() has %d members (cap %d) at %p, want 2 at %p", len(got), cap(got), &got[0], &ms[0])
	}
	if got := m.parts(); &got[0] != &parts[0] || len(got) != 3 || cap(got) != 3 {
		t.Errorf("parts() has %d parts (cap %d) at %p, want 3 at %p", len(got), cap(got), &got[0], &parts[0])
	}
	if at := m.at(in); at != 1 {
		t.Errorf("at = %d, want 1", at)
	}
	var none message
	if none.raw() != nil || none.ms() != nil || none.parts() != nil {
		t.Error("a message set to nothing has slices")
	}
}

// A call record holds no key (callKey reads it from the call's part): a transcript of
// many small blocks has one per two blocks.
func TestCallRefSize(t *testing.T) {
	if n := unsafe.Sizeof(callRef{}); n != 32 {
		t.Fatalf("callRef is %d bytes, want 32", n)
	}
}

// A key of one call, as most are, takes no chain (keyChain): its index slot holds the
// call. A key repeated by a second call has one.
func TestLoneKeysTakeNoChain(t *testing.T) {
	t.Parallel()
	p, err := newPlan(denseBlocks(1000), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.release()
	if len(p.calls) != 1000 || len(p.chains) != 0 {
		t.Fatalf("%d calls of their own ids took %d chains, want none", len(p.calls), len(p.chains))
	}
	in := []byte(`[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"b","name":"f","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"ok"},{"type":"tool_result","tool_use_id":"b","content":"ok"}]},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"ok"}]}]`)
	q, err := newPlan(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer q.release()
	if len(q.chains) != 1 || q.chains[0].head != 0 || q.chains[0].tail != 2 || q.results[2].call != 2 {
		t.Fatalf("chains %+v, results %+v: want one chain of calls 0 and 2, the last result paired with call 2", q.chains, q.results)
	}
}

// The keys of id-less calls are kept apart from the calls, by call index (callKey): those
// of calls after calls with ids must land at their own calls, and pair their responses
// by turn, name and rank.
func TestIdlessKeysAfterCallsWithIDs(t *testing.T) {
	t.Parallel()
	in := []byte(`[{"role":"user","parts":[{"text":"go"}]},
{"role":"model","parts":[{"functionCall":{"id":"a","name":"f","args":{}}},{"functionCall":{"id":"b","name":"f","args":{}}}]},
{"role":"user","parts":[{"functionResponse":{"id":"a","name":"f","response":{}}},{"functionResponse":{"id":"b","name":"f","response":{}}}]},
{"role":"model","parts":[{"functionCall":{"name":"f","args":{"i":0}}},{"functionCall":{"name":"g","args":{}}},{"functionCall":{"name":"f","args":{"i":1}}}]},
{"role":"user","parts":[{"functionResponse":{"name":"g","response":{}}},{"functionResponse":{"name":"f","response":{"i":0}}}]}]`)
	p, err := newPlan(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.release()
	want := []string{"a", "b", idlessKey(1, "f", 0), idlessKey(1, "g", 0), idlessKey(1, "f", 1)}
	for ci := range p.calls {
		if k := p.callKey(int32(ci)); k != want[ci] {
			t.Fatalf("call %d: key %q, want %q", ci, k, want[ci])
		}
	}
	acts := p.report.Actions
	if len(acts) != 1 || acts[0].Stage != StageSynthesizeMissingResults || acts[0].MessageIndex != 3 {
		t.Fatalf("actions %+v, want one synthetic result for the second call of f", acts)
	}
}
