package store

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tmend/tmend/repair"
	"github.com/tmend/tmend/store/model"
)

// rowsOf builds rows of the given keys and orders (xmins 0).
func rowsOf(keys []string, orders []int64) *model.Rows {
	ends := make([]int32, len(keys))
	n := 0
	for i, k := range keys {
		n += len(k)
		ends[i] = int32(n)
	}
	return model.NewRows(strings.Join(keys, ""), ends, orders, make([]uint32, len(keys)))
}

// planCase builds rows with the given orders (keys r0, r1, ...) and an output whose
// message k is "m<k>", from the given inputs (-1: made by tmend; changed marks inputs
// whose message changed).
func planCase(t *testing.T, orders []int64, inputs []int, changed map[int]bool, kind orderKind) rowPlan {
	t.Helper()
	keys := make([]string, len(orders))
	for i := range orders {
		keys[i] = "r" + string(rune('0'+i))
	}
	rows := rowsOf(keys, orders)
	origins := make([]repair.Origin, len(inputs))
	for k, in := range inputs {
		origins[k] = repair.Origin{Input: int32(in), Changed: changed[k], Msg: []byte("m" + string(rune('0'+k)))}
	}
	p, err := planRows(rows, origins, kind)
	require.NoError(t, err)
	return p
}

func TestPlanRows(t *testing.T) {
	t.Parallel()
	m := func(s string) []byte { return []byte(s) }
	t.Run("TimeInsertGoesBetweenItsNeighbours", func(t *testing.T) {
		t.Parallel()
		p := planCase(t, []int64{10, 20, 30}, []int{0, 1, -1, 2}, nil, orderTime)
		require.Equal(t, rowPlan{inserts: []rowInsert{{template: "r1", msg: m("m2"), order: 25, slot: -1}}}, p)
	})
	t.Run("TimeWithoutRoomMovesTheNextRow", func(t *testing.T) {
		t.Parallel()
		p := planCase(t, []int64{10, 11, 12}, []int{0, 1, -1, 2}, nil, orderTime)
		require.Equal(t, rowPlan{
			inserts: []rowInsert{{template: "r1", msg: m("m2"), order: 12, slot: -1}},
			updates: []rowUpdate{{key: "r2", order: 13, reorder: true, slot: -1}},
		}, p)
	})
	t.Run("TimeMovedResultTakesAnOrderBeforeTheRowsItPasses", func(t *testing.T) {
		t.Parallel()
		p := planCase(t, []int64{10, 20, 30, 40}, []int{0, 1, 3, 2}, nil, orderTime)
		require.Equal(t, rowPlan{updates: []rowUpdate{{key: "r3", order: 25, reorder: true, slot: -1}}}, p)
	})
	t.Run("TimeTiesOfKeptRowsStay", func(t *testing.T) {
		t.Parallel()
		// Rows with equal times keep them (the key orders them, as before); only the
		// changed message's row is written.
		p := planCase(t, []int64{10, 10, 10}, []int{0, 1, 2}, map[int]bool{1: true}, orderTime)
		require.Equal(t, rowPlan{updates: []rowUpdate{{key: "r1", msg: m("m1")}}}, p)
	})
	t.Run("TimeInsertAmongTiesMovesTheRowsAfterIt", func(t *testing.T) {
		t.Parallel()
		p := planCase(t, []int64{10, 10, 10}, []int{0, -1, 1, 2}, nil, orderTime)
		require.Equal(t, rowPlan{
			inserts: []rowInsert{{template: "r0", msg: m("m1"), order: 11, slot: -1}},
			updates: []rowUpdate{{key: "r1", order: 12, reorder: true, slot: -1}, {key: "r2", order: 13, reorder: true, slot: -1}},
		}, p)
	})
	t.Run("ChangedAndDroppedRows", func(t *testing.T) {
		t.Parallel()
		p := planCase(t, []int64{1, 2, 3, 4}, []int{0, 2, 3}, map[int]bool{1: true}, orderSequence)
		require.Equal(t, rowPlan{deletes: []string{"r1"}, updates: []rowUpdate{{key: "r2", msg: m("m1")}}}, p)
	})
	t.Run("SequenceInsertRenumbersEveryRowAfterIt", func(t *testing.T) {
		t.Parallel()
		p := planCase(t, []int64{1, 2, 3}, []int{0, -1, 1, 2}, nil, orderSequence)
		require.Equal(t, rowPlan{fresh: 3,
			inserts: []rowInsert{{template: "r0", msg: m("m1"), slot: 0}},
			updates: []rowUpdate{{key: "r1", reorder: true, slot: 1}, {key: "r2", reorder: true, slot: 2}},
		}, p)
		require.NoError(t, p.fill([]int64{7, 8, 9}))
		require.Equal(t, int64(7), p.inserts[0].order)
		require.Equal(t, []int64{8, 9}, []int64{p.updates[0].order, p.updates[1].order})
	})
	t.Run("SequenceInsertAtTheEndTouchesNothingElse", func(t *testing.T) {
		t.Parallel()
		p := planCase(t, []int64{1, 2}, []int{0, 1, -1}, nil, orderSequence)
		require.Equal(t, rowPlan{fresh: 1, inserts: []rowInsert{{template: "r1", msg: m("m2"), slot: 0}}}, p)
	})
	t.Run("NewRowsCopyTheClosestRowBeforeThem", func(t *testing.T) {
		t.Parallel()
		// The first after them when no message before has a row.
		p := planCase(t, []int64{1, 2, 3}, []int{-1, -1, 0, 2, -1, -1, 1}, nil, orderSequence)
		var templates []string
		for _, in := range p.inserts {
			templates = append(templates, in.template)
		}
		require.Equal(t, []string{"r0", "r0", "r2", "r2"}, templates)
	})
	t.Run("BadOriginsAreRefused", func(t *testing.T) {
		t.Parallel()
		rows := rowsOf([]string{"a"}, []int64{1})
		x := []byte("x")
		_, err := planRows(rows, []repair.Origin{{Input: 1, Msg: x}}, orderTime)
		require.Error(t, err)
		_, err = planRows(rows, []repair.Origin{{Input: 0, Msg: x}, {Input: 0, Msg: x}}, orderTime)
		require.Error(t, err)
		_, err = planRows(rows, []repair.Origin{{Input: 0}}, orderTime)
		require.Error(t, err)
	})
}

// nextKept finds, for each message, the next one whose row keeps its place, as a search
// from each message would.
func TestNextKept(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n, head := r.IntN(40)+1, 0
		origins, keep := make([]repair.Origin, n), make([]bool, n)
		for k := range origins {
			origins[k].Input = int32(r.IntN(n+1) - 1)
			keep[k] = r.IntN(3) > 0
		}
		if r.IntN(2) == 0 {
			head = r.IntN(n)
		}
		got := nextKept(origins, keep[:n-head], head)
		for k := head; k < n; k++ {
			want := int32(-1)
			for j := k + 1; j < n; j++ {
				if origins[j].Input >= 0 && keep[j-head] {
					want = int32(j)
					break
				}
			}
			require.Equal(t, want, got[k-head], "message %d of %d from %d", k, n, head)
		}
	}
}

// A session in time order whose last third of messages comes out first (moved as a
// block) plans in time linear in its rows: each of those messages is placed anew.
func BenchmarkPlanRowsMovedRun(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			keys, orders := make([]string, n), make([]int64, n)
			origins := make([]repair.Origin, n)
			for i := range n {
				keys[i], orders[i] = fmt.Sprint(i), int64(i)*1000
				origins[i] = repair.Origin{Input: int32((i + n - n/3) % n), Msg: []byte("m")}
			}
			rows := rowsOf(keys, orders)
			b.ResetTimer()
			for b.Loop() {
				if _, err := planRows(rows, origins, orderTime); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A message with n calls and no results gets n new rows after it: planned in time linear
// in n.
func BenchmarkPlanRowsNewRun(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			rows := rowsOf([]string{"r0", "r1"}, []int64{1, 2})
			origins := make([]repair.Origin, n+2)
			for i := range origins {
				origins[i] = repair.Origin{Input: -1, Msg: []byte("m")}
			}
			origins[0].Input, origins[n+1].Input = 0, 1
			b.ResetTimer()
			for b.Loop() {
				if _, err := planRows(rows, origins, orderSequence); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
