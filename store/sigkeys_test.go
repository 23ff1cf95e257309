package store

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
)

// sigKeysSimple is how the key names are built, plainly: sigKeys builds
// them in one buffer and must agree.
func (r *Redis) sigKeysSimple(id string, split uint64) sigKeys {
	h := sigHash(id)
	tag := fmt.Sprintf("%04x", h>>50)
	base := r.prefix + "{" + tag + "}:"
	sub := strconv.FormatUint((h>>32)%split, 10)
	keys := [3]string{base + "rc:" + sub, base + "ro:" + sub, base + "v:" + id}
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
	for _, ns := range []string{"bm2:", "tenant-a:bm2:"} {
		for _, buckets := range []int{1, 4, 12} {
			r := &Redis{prefix: ns}
			var err error
			if r.c, err = (Params{Buckets: buckets}).resolve(); err != nil {
				t.Fatal(err)
			}
			for i := range 3000 {
				fam := []string{"imatch", "contain", "terms", "lines", "sift"}[i%5]
				id := fmt.Sprintf("s%x:%s.%d:%016x", i%5, fam, i%22, uint64(i)*0x9e3779b97f4a7c15)
				split := uint64(1 + i%4)
				got, want := r.sigKeys(id, split), r.sigKeysSimple(id, split)
				if got != want {
					t.Fatalf("sigKeys(%q, %d) = %+v\nwant %+v", id, split, got, want)
				}
				if r.tagOf(sigHash(id)) != want.tag {
					t.Fatalf("tagOf = %q, want %q", r.tagOf(sigHash(id)), want.tag)
				}
			}
		}
	}
}

// BenchmarkSigKeys: naming the keys of one signature, on the Redis path of
// every message (about thirty times a message).
func BenchmarkSigKeys(b *testing.B) {
	r := &Redis{prefix: "bm2:"}
	r.c, _ = (Params{}).resolve()
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = fmt.Sprintf("s0123456789:imatch.%d:%016x", i%22, uint64(i)*0x9e3779b97f4a7c15)
	}
	b.Run("one-buffer", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r.sigKeys(ids[i%len(ids)], 2)
		}
	})
	b.Run("concatenated", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			r.sigKeysSimple(ids[i%len(ids)], 2)
		}
	})
}
