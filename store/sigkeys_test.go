package store

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// sigKeys names one signature's keys, for tests of one key.
func (r *Redis) sigKeys(id string, split uint64) sigKeys {
	return r.sigKeysOf([]string{id}, split)[0]
}

// sigKeysSimple is how the key names are built, plainly: sigKeysOf builds
// a message's in one buffer and must agree.
func (r *Redis) sigKeysSimple(id string, split uint64) sigKeys {
	h := sigHash(id)
	tag := fmt.Sprintf("%04x", h>>50)
	base := r.prefix + "{" + tag + "}:"
	sub := strconv.FormatUint((h>>32)%split, 10)
	keys := [3]string{base + "kc:" + sub, base + "ko:" + sub, base + "v:" + id}
	sup := !keepsClass(familyOf(id)) // a line key's record is whole, with its class
	c := uint32(h) &^ (1 << 31)
	if sup {
		c |= 1 << 31
	}
	var f [4]byte
	binary.BigEndian.PutUint32(f[:], c)
	return sigKeys{tag: tag, slot: slotOf(tag), field: string(f[:]), keys: keys, sup: sup}
}

func TestSigKeysUnchanged(t *testing.T) {
	for _, ns := range []string{"bm2:", "tenant-a:bm2:", strings.Repeat("long-prefix:", 8)} {
		for _, buckets := range []int{1, 4, 12} {
			r := &Redis{prefix: ns}
			var err error
			if r.c, err = (Params{Buckets: buckets}).resolve(); err != nil {
				t.Fatal(err)
			}
			for _, split := range []uint64{1, 2, 3, 4, 10, 11, 1 << 40} {
				// a message's signatures, of every length up to 60
				var ids []string
				for i := range 60 {
					fam := []string{"imatch", "contain", "terms", "lines", "sift"}[i%5]
					id := fmt.Sprintf("s%x:%s.%d:%016x", i%5, fam, i%22, uint64(i)*0x9e3779b97f4a7c15*split)
					ids = append(ids, id)
					if i%7 != 0 {
						continue // every seventh: a message ends here
					}
					for j, got := range r.sigKeysOf(ids, split) {
						want := r.sigKeysSimple(ids[j], split)
						if got != want {
							t.Fatalf("sigKeysOf(%d ids, %d)[%d] = %+v\nwant %+v", len(ids), split, j, got, want)
						}
						if r.tagOf(sigHash(ids[j])) != want.tag {
							t.Fatalf("tagOf = %q, want %q", r.tagOf(sigHash(ids[j])), want.tag)
						}
					}
					ids = ids[:0]
				}
			}
		}
	}
}

// TestSigKeysOneBuffer: a message's key names are one allocation and the
// slice of them another, however many signatures it has (one string a
// signature was ~42 objects of the Redis milter's ~225 a message).
func TestSigKeysOneBuffer(t *testing.T) {
	r := &Redis{prefix: "tenant-a:bm2:"}
	r.c, _ = (Params{}).resolve()
	ids := make([]string, 49)
	for i := range ids {
		ids[i] = fmt.Sprintf("s0123456789:imatch.%d:%016x", i%22, uint64(i)*0x9e3779b97f4a7c15)
	}
	for _, split := range []uint64{1, 2, 16} {
		if n := testing.AllocsPerRun(20, func() { r.sigKeysOf(ids, split) }); n != 2 {
			t.Errorf("split %d: naming 49 signatures' keys allocates %.0f objects, want 2", split, n)
		}
	}
}

// BenchmarkSigKeys: naming the keys of a message's 64 signatures, on the
// Redis path of every message.
func BenchmarkSigKeys(b *testing.B) {
	r := &Redis{prefix: "bm2:"}
	r.c, _ = (Params{}).resolve()
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("s0123456789:imatch.%d:%016x", i%22, uint64(i)*0x9e3779b97f4a7c15)
	}
	b.Run("one-buffer", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r.sigKeysOf(ids, 2)
		}
	})
	b.Run("concatenated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, id := range ids {
				r.sigKeysSimple(id, 2)
			}
		}
	})
}
