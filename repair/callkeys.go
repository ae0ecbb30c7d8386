package repair

import "hash/maphash"

// callIndex finds the calls of a key (a chain in pair, the first call in the in-place
// dialects) without holding the keys: a slot holds 1 + the value, and the value's key
// is read from the calls. It is sized once for all the calls, open-addressed at most
// half full: 8 to 16 bytes a call, where a map[string]int32 took about 50 while the
// transcript's million calls grew it, and as much again in outgrown tables.
type callIndex struct {
	slots []int32
	seed  maphash.Seed
}

// reset empties the table and sizes it for n keys.
func (t *callIndex) reset(n int) {
	if t.seed == (maphash.Seed{}) {
		t.seed = maphash.MakeSeed()
	}
	size := 8
	for size < 2*n {
		size *= 2
	}
	t.slots = grow(t.slots, size)
}

// find returns the value of key and true, or the slot where key goes and false. keyOf
// gives a value's key.
func (t *callIndex) find(key string, keyOf func(v int32) string) (int32, int, bool) {
	mask := len(t.slots) - 1
	i := int(maphash.String(t.seed, key)) & mask
	for ; t.slots[i] != 0; i = (i + 1) & mask {
		if v := t.slots[i] - 1; keyOf(v) == key {
			return v, i, true
		}
	}
	return -1, i, false
}

// set stores value v in slot i (from find).
func (t *callIndex) set(i int, v int32) { t.slots[i] = v + 1 }
