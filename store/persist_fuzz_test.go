package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"
)

// encodeState is Save's writer into memory.
func encodeState(e *Embedded) ([]byte, error) {
	var buf bytes.Buffer
	cw := &chunkWriter{w: bufio.NewWriter(&buf)}
	e.writeState(cw)
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	return buf.Bytes(), cw.err
}

// memStore opens an embedded store without a file (nothing is loaded
// nor saved) at the fuzz targets' clock.
func memStore(t testing.TB, now time.Time) *Embedded {
	t.Helper()
	e, err := OpenEmbedded(EmbeddedOptions{SaveInterval: -1, Params: Params{Now: func() time.Time { return now }}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// FuzzDecodeState runs the store file's decoder (decodeState, which the
// loader runs on the file) on bytes in memory: no file is written or
// renamed, so an execution costs microseconds where FuzzLoadState's cost
// milliseconds. Whatever the bytes, decoding ends with an answer, never a
// panic; what was loaded is usable; and the state it saves decodes again
// in full, to the same counts.
func FuzzDecodeState(f *testing.F) {
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	e := memStore(f, now)
	fillSeedState(e, now)
	seed, err := encodeState(e)
	if err != nil {
		f.Fatal(err)
	}
	v5, _ := version5File(e, now) // pointers holding refs, read as slots
	e.Close()
	f.Add(seed)
	f.Add(v5)
	f.Add(seed[:len(seed)/2])
	f.Add(seed[:60])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeAndCheck(t, now, b)
		// The checksums stop nearly every mutation at the chunk's door;
		// sealed, the same bytes reach the records' decoders.
		decodeAndCheck(t, now, seal(b))
	})
}

// seal rewrites the checksums of the header and of every whole chunk of
// a state file's bytes, leaving everything else as it is.
func seal(b []byte) []byte {
	b = bytes.Clone(b)
	const hdr = len(fileMagic) + 4 + 8 + 4 + 8 + 8 + 4
	if len(b) < hdr {
		return b
	}
	binary.LittleEndian.PutUint32(b[hdr-4:], crc32.Checksum(b[:hdr-4], crcTable))
	for at := hdr; at+5 <= len(b); {
		n := int(binary.LittleEndian.Uint32(b[at+1:]))
		end := at + 5 + n
		if n > chunkMax || end+4 > len(b) {
			break
		}
		binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[at:end], crcTable))
		at = end + 4
	}
	return b
}

// decodeAndCheck decodes b into a fresh store and checks what it holds.
func decodeAndCheck(t *testing.T, now time.Time, b []byte) {
	t.Helper()
	ctx := context.Background()
	{
		e := memStore(t, now)
		defer e.Close()
		lost, cause := e.decodeState(bytes.NewReader(b))
		if (cause == nil) != (lost == "") {
			t.Fatalf("decode: cause %v with lost %q; want both or neither", cause, lost)
		}
		if _, err := e.Observe(ctx, Observation{Keys: []string{"a", "b", "c"}, Recipients: []string{"q@x"}, Time: now}); err != nil {
			t.Fatalf("observe after decoding: %v", err)
		}
		saved, err := encodeState(e)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		e2 := memStore(t, now)
		defer e2.Close()
		if lost, cause := e2.decodeState(bytes.NewReader(saved)); cause != nil {
			t.Fatalf("the saved state does not decode: %v (%s)", cause, lost)
		}
		s1, s2 := e.Stats(), e2.Stats()
		s1.LastSave, s2.LastSave, s1.Evicted, s2.Evicted = time.Time{}, time.Time{}, 0, 0
		if s1 != s2 {
			t.Fatalf("saved and decoded again: %+v, before %+v", s2, s1)
		}
	}
}

// TestDecodeStateSlotRefOutOfRange: a slots record naming a ref wider
// than a pointer holds is damage (found by FuzzDecodeState in CI). The
// load says so and keeps no slot of it, so that the state it saves
// decodes again in full.
func TestDecodeStateSlotRefOutOfRange(t *testing.T) {
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	b := seedStateFile(t, now)
	// The first record's first ref: i64 bucket, u32 first, u32 n, then
	// u32 ref and u8 class.
	off := chunkOffset(t, b, chunkSlots) + 5 + 8 + 4 + 4
	binary.LittleEndian.PutUint32(b[off:], refMask+1)
	b = seal(b)
	e2 := memStore(t, now)
	defer e2.Close()
	if lost, cause := e2.decodeState(bytes.NewReader(b)); cause == nil {
		t.Fatalf("a ref out of range decoded without a cause (lost %q)", lost)
	}
	decodeAndCheck(t, now, b)
}

// TestDecodeStatePackedGroupBits: a packed record of one pointer with 26
// group bits, 30 bytes that FuzzDecodeState's sealing lets through (found
// looking for its stalls: 4 bytes a group, 705 MB allocated and seconds an
// execution), is read into a table of the groups 64 entries need, and its
// pointer is still found.
func TestDecodeStatePackedGroupBits(t *testing.T) {
	now := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	seed := seedStateFile(t, now)
	const hdr = len(fileMagic) + 4 + 8 + 4 + 8 + 8 + 4
	const sig, val = 0x5eed, 5 << switchBits
	e2 := memStore(t, now)
	defer e2.Close()
	cb := e2.c.bucket(now)
	// u8 shard, i64 bucket, u8 gbits, u32 n, n × (u64 hash, u32 pointer).
	p := []byte{0}
	p = binary.LittleEndian.AppendUint64(p, uint64(cb))
	p = append(p, 26)
	p = binary.LittleEndian.AppendUint32(p, 1)
	p = binary.LittleEndian.AppendUint64(p, denseHash(sig))
	p = binary.LittleEndian.AppendUint32(p, val)
	b := append([]byte(nil), seed[:hdr]...)
	b = append(b, chunkPacked)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
	b = append(b, p...)
	b = append(b, 0, 0, 0, 0)
	b = append(b, chunkEnd, 0, 0, 0, 0, 0, 0, 0, 0)
	b = seal(b)

	if lost, cause := e2.decodeState(bytes.NewReader(b)); cause != nil {
		t.Fatalf("decode: %v (%s)", cause, lost)
	}
	d := e2.ptrs[0].tabs[mod(cb, int64(e2.c.nb))].d
	if d == nil {
		t.Fatal("the packed pointer was not loaded")
	}
	if want := groupBits(64); d.gbits > want {
		t.Errorf("a table of one pointer loaded with %d group bits (%d groups); want at most %d", d.gbits, 1<<d.gbits, want)
	}
	if i, ok := d.find(sig); !ok || d.val(i) != val {
		t.Errorf("the pointer read with fewer group bits: found %v, value %d; want %d", ok, d.val(i), val)
	}
	decodeAndCheck(t, now, b)
}

// seedStateFile is the encoded state of a store filled by fillSeedState.
func seedStateFile(t *testing.T, now time.Time) []byte {
	t.Helper()
	e := memStore(t, now)
	fillSeedState(e, now)
	b, err := encodeState(e)
	e.Close()
	if err != nil {
		t.Fatal(err)
	}
	return b
}
