package store

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// A campaign's ref is part of the stored state: newRef's hash over a
// stack buffer must be the one written id by id (the ref of a state saved
// before), in any order of the ids, and past the stack's 64 ids and 4 KiB.
func TestNewRefStable(t *testing.T) {
	streamed := func(ids []string) (uint32, uint32) {
		s := slices.Clone(ids)
		slices.Sort(s)
		d := xxhash.New()
		for _, id := range s {
			d.WriteString(id)
			d.Write([]byte{0})
		}
		h := d.Sum64()
		return uint32(h >> (64 - refBits)), uint32(h)
	}
	for _, n := range []int{0, 1, 3, 64, 65, 200} {
		for _, width := range []int{1, 40, 100} {
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("v1:%0*d", width, (i*7919)%1000)
			}
			ref, origin := newRef(ids)
			wantRef, wantOrigin := streamed(ids)
			if ref != wantRef || origin != wantOrigin {
				t.Errorf("%d ids of %d: ref %d/%d, want %d/%d", n, width, ref, origin, wantRef, wantOrigin)
			}
			if n > 1 {
				slices.Reverse(ids)
				if r, o := newRef(ids); r != ref || o != origin {
					t.Errorf("%d ids of %d reversed: %d/%d, want %d/%d", n, width, r, o, ref, origin)
				}
			}
		}
	}
	ids := []string{strings.Repeat("a", 10), "b"}
	if allocs := testing.AllocsPerRun(100, func() { newRef(ids) }); allocs != 0 {
		t.Errorf("newRef of 2 ids: %v allocations, want 0", allocs)
	}
}
