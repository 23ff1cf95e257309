package store

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// The embedded store's file, version 7, little-endian:
//
//	header: "BMSTORE\x00", u32 version, i64 bucket length (ms),
//	        u32 buckets, [8]byte key id, i64 saved at (unix ms),
//	        u32 CRC-32C of the preceding header bytes
//	chunks: u8 kind, u32 length, payload, u32 CRC-32C of kind+length+payload
//
// Chunk kinds, written in this order so that damage late in the file spares
// the votes: 1 votes, 4 end of votes (empty: proves the votes complete),
// 2 counters, 8 first sightings, 5 pointers, 7 packed pointers, 9 and 10
// the same of the support families' ring, 14 message slots, 11 mixed
// buckets, 6 campaigns,
// 12 aliases, 13 present, 255 end (empty).
// A chunk holds whole records:
//
//	votes:     u16 key length, key, u32 n, n × (6-byte voter, u8 kind, i64 unix s)
//	counters:  u64 signature hash, i64 last bucket, u8 mode,
//	           mode 1 (exact): u32 n, n × (u64 member, i64 bucket)
//	           mode 2 (HLL):   u8 k, k × (i64 bucket, 16384 registers)
//	sightings: i64 bucket, u32 n, n × (u32 ref, u32 recipient fingerprint,
//	           u32 first (unix s), u32 origin, u16 network, u16 sender):
//	           the campaigns of one message (fsRec)
//	slots:     i64 bucket, u32 first slot, u32 n, n × (u32 ref, u8
//	           class): the refs the bucket's pointers name and the class
//	           of their campaign's only sender (slots.go, model.go); a
//	           record goes on where the bucket's last one ended
//	pointers:  i64 bucket, u32 n, n × (u64 signature hash, u32 pointer:
//	           the slot of its bucket << 3 | its switch count)
//	packed:    u8 shard, i64 bucket, u8 gbits, u32 n, n × (u64 the top
//	           32+gbits bits of the mixed hash, u32 pointer): packed
//	           pointers (denseTable), which keep no whole hash (16+gbits
//	           bits in chunk 10: the support ring keeps 16 of check)
//	mixed:     i64 the newest bucket read from a version 4 file or before,
//	           whose one ring held the support families' pointers too
//	campaigns: u32 ref, u32 origin, i64 first (unix s), i64 last bucket,
//	           u8 n, n × u16 network, u8 m, m × u16 sender (big-endian):
//	           the campaigns of two or more messages
//	aliases:   u32 part ref, u32 root, i64 bucket of the merge: the
//	           stored merge (alias.go); a version 5 file without it is
//	           read as one without merges
//	present:   i64 the latest time counted (unix ms, ahead.go), so that
//	           times ahead count at the saved present after a restart; a
//	           file without it is read as one that counted nothing
//
// Version 6 is version 7 without the class in chunk 14: its pointers are
// read as naming no known sender. Version 5 is version 6 without chunk 14, its pointers holding the ref
// itself (ref << 3 | switches): it is read whole, each bucket's refs
// taking a slot each. Version 4 is version 5 with one ring of pointers (no chunks 9 to 11): it
// is read whole, its buckets marked mixed. Counters count campaigns (by
// campaignSig), not keys. Version 1 files
// counted keys: their votes are read, their counts are not (counting
// starts afresh). Version 2 files are version 3 without packed pointers.
// Versions 2 and 3 kept every campaign's record in chunk 6 and its first
// sighting as chunk 3 (i64 bucket, u32 n, n × (u64 campaignSig, u32
// recipient fingerprint)) and had no gbits in chunk 7 (it was
// min(denseBits(n), 26)); they are read whole, each first sighting as a
// counter of its one recipient (what a campaign's second message makes).
//
// An exact-set member is a 48-bit pseudonym, or a placeholder (bit 63 set,
// a fingerprint in the low 32 bits) for a first recipient known only by its
// fingerprint.
const (
	fileMagic   = "BMSTORE\x00"
	fileVersion = 7

	chunkVotes    = 1
	chunkCounters = 2
	chunkFS       = 3 // versions 2 and 3
	chunkVotesEnd = 4
	chunkPointers = 5
	chunkCamps    = 6
	chunkPacked   = 7
	chunkRecs     = 8
	// Version 5: the support families' pointers, in a ring of their own.
	chunkSupport       = 9
	chunkSupportPacked = 10
	chunkMixed         = 11
	// The stored merge's aliases (alias.go), the last chunk: a build
	// without it stops there, with every other chunk read.
	chunkAliases = 12
	// The latest time counted (ahead.go), after the aliases for the same
	// reason.
	chunkPresent = 13
	// Version 6: the message slots the pointers name (slots.go).
	chunkSlots = 14
	chunkEnd   = 255

	chunkTarget = 1 << 20  // flush a chunk past this size
	chunkMax    = 64 << 20 // a longer chunk on disk is damage
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// CorruptFileError reports an embedded-store file that could not be read
// in full. The file was moved aside (MovedTo) and the store opened with
// what was read before the damage.
type CorruptFileError struct {
	Path    string
	MovedTo string
	Lost    string // what was not recovered
	Err     error
}

func (e *CorruptFileError) Error() string {
	return fmt.Sprintf("store file %s is damaged (%v); moved to %s; %s", e.Path, e.Err, e.MovedTo, e.Lost)
}

func (e *CorruptFileError) Unwrap() error { return e.Err }

type chunkWriter struct {
	w     *bufio.Writer
	buf   []byte
	err   error
	after func(kind byte) // Embedded.afterChunk
}

func (cw *chunkWriter) flush(kind byte) {
	if len(cw.buf) == 0 && kind != chunkEnd && kind != chunkVotesEnd {
		return
	}
	var h [5]byte
	h[0] = kind
	binary.LittleEndian.PutUint32(h[1:], uint32(len(cw.buf)))
	crc := crc32.Update(0, crcTable, h[:])
	crc = crc32.Update(crc, crcTable, cw.buf)
	var c [4]byte
	binary.LittleEndian.PutUint32(c[:], crc)
	for _, b := range [][]byte{h[:], cw.buf, c[:]} {
		if cw.err == nil {
			_, cw.err = cw.w.Write(b)
		}
	}
	cw.buf = cw.buf[:0]
	if cw.after != nil {
		cw.after(kind)
	}
}

func (cw *chunkWriter) maybeFlush(kind byte) {
	if len(cw.buf) >= chunkTarget {
		cw.flush(kind)
	}
}

func le64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
func le32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }

func appendPseudonym(b []byte, p pseudonym) []byte { return append(b, p.bytes()...) }

// Save writes the state file atomically: a temporary file in the same
// directory, fsync, rename over the old file, fsync of the directory.
func (e *Embedded) Save() (err error) {
	if e.path == "" {
		return nil
	}
	start := time.Now()
	defer func() {
		e.observeOp("save", start, err)
		if err != nil {
			e.lastErr.Store(&err)
		} else {
			e.lastErr.Store(nil)
			e.lastAt.Store(time.Now().UnixMilli())
		}
	}()
	e.saveMu.Lock()
	defer e.saveMu.Unlock()
	dir := filepath.Dir(e.path)
	f, err := os.CreateTemp(dir, filepath.Base(e.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("save store: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	cw := &chunkWriter{w: bufio.NewWriterSize(f, 1<<20), after: e.afterChunk}
	e.writeState(cw)
	if cw.err == nil {
		cw.err = cw.w.Flush()
	}
	if cw.err != nil {
		return fmt.Errorf("save store: write %s: %w", tmp, cw.err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("save store: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save store: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, e.path); err != nil {
		return fmt.Errorf("save store: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync() // the rename is durable once the directory is
		d.Close()
	}
	return nil
}

// fileHeader is a state file's header in the given format version,
// written at the time given.
func (c *counting) fileHeader(version uint32, at time.Time) []byte {
	kid, _ := hex.DecodeString(c.keyID)
	h := []byte(fileMagic)
	h = le32(h, version)
	h = le64(h, uint64(c.bucketLen.Milliseconds()))
	h = le32(h, uint32(c.Buckets))
	h = append(h, kid...)
	h = le64(h, uint64(at.UnixMilli()))
	return le32(h, crc32.Checksum(h, crcTable))
}

func (e *Embedded) writeState(cw *chunkWriter) {
	if _, err := cw.w.Write(e.c.fileHeader(fileVersion, time.Now())); err != nil {
		cw.err = err
		return
	}

	// Votes first: they are the users' data.
	e.votes.mu.RLock()
	for k, sv := range e.votes.bySig {
		b := binary.LittleEndian.AppendUint16(cw.buf, uint16(len(k)))
		b = append(b, k...)
		b = le32(b, uint32(len(sv.voters)))
		for p, v := range sv.voters {
			b = appendPseudonym(b, p)
			b = append(b, v.kind)
			b = le64(b, uint64(v.at))
		}
		cw.buf = b
		cw.maybeFlush(chunkVotes)
	}
	e.votes.mu.RUnlock()
	cw.flush(chunkVotes)
	cw.flush(chunkVotesEnd)

	// Counts: copy a shard under its lock, write it without.
	now := e.c.bucket(e.c.Now())
	oldest := now - int64(e.c.nb) + 1
	var shardBuf []byte
	for i := range e.shards {
		sh := &e.shards[i]
		shardBuf = shardBuf[:0]
		sh.mu.Lock()
		for sig, c := range sh.ctr {
			if c.last < oldest {
				continue
			}
			b := le64(shardBuf, sig)
			b = le64(b, uint64(c.last))
			if c.exact != nil {
				b = append(b, 1)
				b = le32(b, uint32(len(c.exact)))
				for p, at := range c.exact {
					b = le64(b, uint64(p))
					b = le64(b, uint64(at))
				}
			} else {
				b = append(b, 2)
				live := 0
				for _, hb := range c.hlls {
					if hb.id >= oldest {
						live++
					}
				}
				b = append(b, byte(live))
				for _, hb := range c.hlls {
					if hb.id >= oldest {
						b = le64(b, uint64(hb.id))
						b = append(b, hb.h[:]...)
					}
				}
			}
			shardBuf = b
		}
		sh.mu.Unlock()
		cw.buf = append(cw.buf, shardBuf...)
		cw.maybeFlush(chunkCounters)
	}
	cw.flush(chunkCounters)

	for i := range e.shards {
		sh := &e.shards[i]
		shardBuf = shardBuf[:0]
		sh.mu.Lock()
		for _, slot := range sh.fs {
			if slot.size() == 0 || slot.id < oldest {
				continue
			}
			b := le64(shardBuf, uint64(slot.id))
			b = le32(b, uint32(slot.size()))
			slot.each(func(r fsRec) {
				b = le32(b, r.ref())
				b = le32(b, r.fp)
				b = le32(b, r.first)
				b = le32(b, r.origin)
				b = binary.LittleEndian.AppendUint16(b, r.net)
				b = binary.LittleEndian.AppendUint16(b, r.snd)
			})
			shardBuf = b
		}
		sh.mu.Unlock()
		cw.buf = append(cw.buf, shardBuf...)
		cw.maybeFlush(chunkRecs)
	}
	cw.flush(chunkRecs)

	for _, r := range []struct {
		ring         int
		open, packed byte
	}{{ringMain, chunkPointers, chunkPacked}, {ringSupport, chunkSupport, chunkSupportPacked}} {
		for i := range e.ptrs {
			ps := &e.ptrs[i]
			shardBuf = shardBuf[:0]
			ps.mu.Lock()
			shardBuf = appendTables(shardBuf, ps.ring(r.ring), oldest)
			ps.mu.Unlock()
			cw.buf = append(cw.buf, shardBuf...)
			cw.maybeFlush(r.open)
		}
		cw.flush(r.open)

		for i := range e.ptrs {
			ps := &e.ptrs[i]
			shardBuf = shardBuf[:0]
			ps.mu.Lock()
			for _, slot := range ps.ring(r.ring) {
				if slot.d == nil || slot.id < oldest {
					continue
				}
				b := append(shardBuf, byte(i))
				b = le64(b, uint64(slot.id))
				b = append(b, byte(slot.d.gbits))
				b = le32(b, uint32(slot.d.len()))
				slot.d.each(func(h uint64, v uint32) {
					b = le64(b, h)
					b = le32(b, v)
				})
				shardBuf = b
			}
			ps.mu.Unlock()
			cw.buf = append(cw.buf, shardBuf...)
			cw.maybeFlush(r.packed)
		}
		cw.flush(r.packed)
	}
	// The slots after the pointers: every slot a saved pointer names was
	// taken before it was written, so it is saved too (slots are only
	// added to a bucket), where slots saved first would miss those of the
	// messages written meanwhile, and a slot taken after a restart would
	// give such a pointer another campaign's ref.
	cw.buf = e.slots.appendSlots(cw.buf, oldest, func(b []byte) []byte {
		cw.buf = b
		cw.maybeFlush(chunkSlots)
		return cw.buf
	})
	cw.flush(chunkSlots)
	if m := e.mixedUpTo.Load(); m >= oldest {
		cw.buf = le64(cw.buf, uint64(m))
		cw.flush(chunkMixed)
	}

	for i := range e.shards {
		sh := &e.shards[i]
		shardBuf = shardBuf[:0]
		sh.mu.Lock()
		for ref, m := range sh.camps {
			if m.last < oldest {
				continue
			}
			b := le32(shardBuf, ref)
			b = le32(b, m.origin)
			b = le64(b, uint64(m.first))
			b = le64(b, uint64(m.last))
			nets, snds := sh.setsOf(ref, m)
			b = append(b, byte(len(nets)/2))
			b = append(b, nets...)
			b = append(b, byte(len(snds)/2))
			shardBuf = append(b, snds...)
		}
		sh.mu.Unlock()
		cw.buf = append(cw.buf, shardBuf...)
		cw.maybeFlush(chunkCamps)
	}
	cw.flush(chunkCamps)
	cw.buf = e.aliases.appendAliases(cw.buf, oldest)
	cw.flush(chunkAliases)
	if l := e.present.latest.Load(); l != 0 {
		cw.buf = le64(cw.buf, uint64(l))
		cw.flush(chunkPresent)
	}
	cw.flush(chunkEnd)
}

// appendTables appends the live tables of a ring of buckets: i64 bucket,
// u32 n, n × (u64 hash, u32 value).
func appendTables(b []byte, tabs []fsBucket, oldest int64) []byte {
	for _, slot := range tabs {
		if slot.t == nil || slot.id < oldest || slot.t.n == 0 {
			continue
		}
		b = le64(b, uint64(slot.id))
		b = le32(b, uint32(slot.t.n))
		slot.t.each(func(sig uint64, v uint32) {
			b = le64(b, sig)
			b = le32(b, v)
		})
	}
	return b
}

// load reads the state file. A missing file is a fresh start.
func (e *Embedded) load() error {
	f, err := os.Open(e.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return e.moveAside(err, "nothing was read")
	}
	defer f.Close()
	if lost, cause := e.decodeState(bufio.NewReaderSize(f, 1<<20)); cause != nil {
		return e.moveAside(cause, lost)
	}
	return nil
}

// decodeState reads a state file's content from r into e: the loader's
// decoder, apart from the file so that FuzzDecodeState runs it on bytes in
// memory. On damage it returns the cause and what was lost; what was read
// before the damage stays loaded.
func (e *Embedded) decodeState(r io.Reader) (lost string, cause error) {
	// A file holds what was live when it was written: records of buckets,
	// and votes, that have left the window since go now, whether the file
	// was read whole or up to damage (a save would drop them, so the state
	// would not be what it saves).
	defer func() {
		e.slotGens()
		e.sweep(e.c.Now())
	}()
	hdr := make([]byte, len(fileMagic)+4+8+4+8+8+4)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return "nothing was read", fmt.Errorf("header: %w", err)
	}
	if string(hdr[:8]) != fileMagic {
		return "nothing was read", errors.New("not a bulkmilter store file")
	}
	version := binary.LittleEndian.Uint32(hdr[8:])
	if version > fileVersion || version < 1 {
		return "nothing was read", fmt.Errorf("file version %d, this build reads %d", version, fileVersion)
	}
	body := hdr[:len(hdr)-4]
	if crc32.Checksum(body, crcTable) != binary.LittleEndian.Uint32(hdr[len(hdr)-4:]) {
		return "nothing was read", errors.New("header checksum mismatch")
	}
	bucketMs := int64(binary.LittleEndian.Uint64(hdr[12:]))
	buckets := int(binary.LittleEndian.Uint32(hdr[20:]))
	kid := hex.EncodeToString(hdr[24:32])
	// Counts made with another window or secret would be wrong here; the
	// votes are kept whatever the parameters.
	countsOK := bucketMs == e.c.bucketLen.Milliseconds() && buckets == e.c.Buckets && kid == e.c.keyID &&
		version >= 2

	// A pointer of version 6 names a slot of its bucket; before, its ref.
	value := func(_ int64, v uint32) (uint32, bool) { return v, true }
	if version < 6 {
		value = (&legacySlots{e: e}).value
	}

	var payload []byte
	var err error
	seen := map[byte]bool{}
	for {
		var h [5]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return lostAfter(seen), fmt.Errorf("truncated: %w", err)
		}
		n := binary.LittleEndian.Uint32(h[1:])
		if n > chunkMax {
			return lostAfter(seen), fmt.Errorf("chunk of %d bytes", n)
		}
		if cap(payload) < int(n) {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		var c [4]byte
		if _, err := io.ReadFull(r, payload); err != nil {
			return lostAfter(seen), fmt.Errorf("truncated: %w", err)
		}
		if _, err := io.ReadFull(r, c[:]); err != nil {
			return lostAfter(seen), fmt.Errorf("truncated: %w", err)
		}
		crc := crc32.Update(0, crcTable, h[:])
		crc = crc32.Update(crc, crcTable, payload)
		if crc != binary.LittleEndian.Uint32(c[:]) {
			return lostAfter(seen), fmt.Errorf("chunk checksum mismatch (kind %d)", h[0])
		}
		seen[h[0]] = true
		switch h[0] {
		case chunkVotes:
			err = e.loadVotes(payload)
		case chunkVotesEnd:
		case chunkCounters:
			if countsOK {
				err = e.loadCounters(payload)
			}
		case chunkFS:
			if countsOK {
				err = e.loadLegacyFS(payload)
			}
		case chunkRecs:
			if countsOK {
				err = e.loadRecs(payload)
			}
		case chunkSlots:
			if countsOK {
				err = e.loadSlots(payload, version)
			}
		case chunkPointers, chunkSupport, chunkPacked, chunkSupportPacked:
			if countsOK {
				ring := ringMain
				if h[0] == chunkSupport || h[0] == chunkSupportPacked {
					ring = ringSupport
				}
				var ids []int64
				if h[0] == chunkPointers || h[0] == chunkSupport {
					ids, err = e.loadTables(payload, value, func(sig uint64) (*sync.Mutex, []fsBucket, *int) {
						ps := &e.ptrs[e.ptrShardOf(sig)]
						return &ps.mu, ps.ring(ring), &ps.entries
					})
				} else {
					ids, err = e.loadPacked(payload, version, ring, value)
				}
				if version < 5 {
					e.mixedAlso(ids)
				}
			}
		case chunkCamps:
			if countsOK {
				err = e.loadCamps(payload)
			}
		case chunkMixed:
			if countsOK {
				d := &decoder{b: payload}
				e.mixedAlso([]int64{int64(d.u64())})
				if d.bad || len(d.b) > 0 {
					err = fmt.Errorf("mixed buckets: %w", errRecord)
				}
			}
		case chunkAliases:
			if countsOK {
				err = e.loadAliases(payload)
			}
		case chunkPresent:
			d := &decoder{b: payload}
			ms := int64(d.u64())
			if d.bad || len(d.b) > 0 || ms <= 0 {
				err = fmt.Errorf("present: %w", errRecord)
			} else if countsOK {
				e.present.note(time.UnixMilli(ms))
			}
		case chunkEnd:
			return "", nil
		default:
			err = fmt.Errorf("unknown chunk kind %d", h[0])
		}
		if err != nil {
			return lostAfter(seen), err
		}
	}
}

func lostAfter(seen map[byte]bool) string {
	switch {
	case seen[chunkVotesEnd]:
		return "votes were read in full; some counts were lost"
	case seen[chunkVotes]:
		return "some votes may be lost (the rest were read); counts were lost"
	}
	return "votes and counts were lost"
}

// moveAside renames the damaged file and returns a CorruptFileError; if it
// cannot be renamed the store must not start (a later save would overwrite
// the only copy of the votes).
func (e *Embedded) moveAside(cause error, lost string) error {
	to := e.path + ".corrupt-" + strconv.FormatInt(time.Now().Unix(), 10)
	if err := os.Rename(e.path, to); err != nil {
		return fmt.Errorf("store file %s is damaged (%v) and cannot be moved aside: %w", e.path, cause, err)
	}
	return &CorruptFileError{Path: e.path, MovedTo: to, Lost: lost, Err: cause}
}

// decoder reads records; any short read marks it failed.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) take(n int) []byte {
	if d.bad || len(d.b) < n {
		d.bad = true
		return make([]byte, n)
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

func (d *decoder) u8() byte    { return d.take(1)[0] }
func (d *decoder) u16() uint16 { return binary.LittleEndian.Uint16(d.take(2)) }
func (d *decoder) u32() uint32 { return binary.LittleEndian.Uint32(d.take(4)) }
func (d *decoder) u64() uint64 { return binary.LittleEndian.Uint64(d.take(8)) }
func (d *decoder) pseudonym() pseudonym {
	p, _ := pseudonymFromBytes(string(d.take(pseudonymLen)))
	return p
}

// count reads a record count and checks it against what is left, so a
// damaged count cannot make a huge allocation.
func (d *decoder) count(recLen int) int {
	n := int(d.u32())
	if n*recLen > len(d.b) {
		d.bad = true
		return 0
	}
	return n
}

var errRecord = errors.New("malformed record")

func (e *Embedded) loadVotes(b []byte) error {
	d := &decoder{b: b}
	vb := &e.votes
	vb.mu.Lock()
	defer vb.mu.Unlock()
	for len(d.b) > 0 && !d.bad {
		k := string(d.take(int(d.u16())))
		n := d.count(pseudonymLen + 1 + 8)
		if d.bad {
			break
		}
		sv := vb.bySig[k]
		if sv == nil {
			sv = &sigVotes{voters: make(map[pseudonym]voteVal, n)}
			vb.bySig[k] = sv
		}
		for range n {
			p := d.pseudonym()
			v := voteVal{kind: d.u8(), at: int64(d.u64())}
			if v.kind != 'n' && v.kind != 'b' {
				d.bad = true
				break
			}
			sv.voters[p] = v
			vb.index(p, k)
		}
		vb.rebuild(k, sv, -1<<63)
	}
	vb.n.Store(int64(len(vb.bySig)))
	if d.bad {
		return fmt.Errorf("votes: %w", errRecord)
	}
	return nil
}

func (e *Embedded) loadCounters(b []byte) error {
	d := &decoder{b: b}
	for len(d.b) > 0 && !d.bad {
		sig := d.u64()
		c := &ecounter{last: int64(d.u64())}
		switch d.u8() {
		case 1:
			n := d.count(8 + 8)
			c.exact = make(map[pseudonym]int64, n)
			for range n {
				p := pseudonym(d.u64())
				at := int64(d.u64())
				if _, ok := c.exact[p]; !ok {
					c.exact[p] = at
					c.bump(at, 1)
				}
			}
		case 2:
			k := int(d.u8())
			for range k {
				id := int64(d.u64())
				h := new(hll)
				copy(h[:], d.take(hllM))
				for _, r := range h {
					if r > hllQ+1 {
						d.bad = true
					}
				}
				c.hlls = append(c.hlls, hllBucket{id, h})
			}
		default:
			d.bad = true
		}
		if d.bad {
			break
		}
		sh := e.shard(sig)
		sh.mu.Lock()
		if old := sh.ctr[sig]; old != nil {
			sh.entries -= old.weight()
		}
		sh.ctr[sig] = c
		sh.entries += c.weight()
		sh.mu.Unlock()
	}
	if d.bad {
		return fmt.Errorf("counters: %w", errRecord)
	}
	return nil
}

// loadTables reads pointers into the tables shardOf names for each hash,
// and returns the buckets it read.
func (e *Embedded) loadTables(b []byte, value func(id int64, v uint32) (uint32, bool), shardOf func(sig uint64) (*sync.Mutex, []fsBucket, *int)) ([]int64, error) {
	d := &decoder{b: b}
	nb := int64(e.c.nb)
	var ids []int64
	for len(d.b) > 0 && !d.bad {
		id := int64(d.u64())
		n := d.count(8 + 4)
		if d.bad || n == 0 {
			continue
		}
		ids = append(ids, id)
		var mu *sync.Mutex
		var entries *int
		var slot *fsBucket
		for range n {
			sig := d.u64()
			v, ok := value(id, d.u32())
			if !ok {
				continue
			}
			m, tabs, en := shardOf(sig)
			if m != mu {
				if mu != nil {
					mu.Unlock()
				}
				mu, entries = m, en
				mu.Lock()
				slot = &tabs[mod(id, nb)]
				switch {
				case slot.empty() || slot.id < id:
					*entries -= slot.size()
					slot.id, slot.gen, slot.t, slot.d = id, 0, newFSTable(n), nil
				case slot.id == id && slot.t == nil:
					slot.t = newFSTable(n) // beside packed pointers
				}
			}
			if slot.id != id {
				continue
			}
			if slot.t.put(sig, v) {
				*entries++
			}
		}
		if mu != nil {
			mu.Unlock()
		}
	}
	if d.bad {
		return ids, fmt.Errorf("pointers: %w", errRecord)
	}
	return ids, nil
}

// mixedAlso marks buckets ids as holding support families' pointers in
// the main ring (a file of version 4 or before kept one ring).
func (e *Embedded) mixedAlso(ids []int64) {
	for _, id := range ids {
		if id > e.mixedUpTo.Load() {
			e.mixedUpTo.Store(id)
		}
	}
}

// loadRecs reads first sightings.
func (e *Embedded) loadRecs(b []byte) error {
	d := &decoder{b: b}
	nb := int64(e.c.nb)
	for len(d.b) > 0 && !d.bad {
		id := int64(d.u64())
		n := d.count(20)
		for range n {
			r := fsRec{key: d.u32() | recUsed, fp: d.u32(), first: d.u32(), origin: d.u32(), net: d.u16(), snd: d.u16()}
			if r.ref() > refMask {
				d.bad = true
			}
			if d.bad {
				break
			}
			sh := e.shard(campaignSig(r.ref()))
			sh.mu.Lock()
			slot := &sh.fs[mod(id, nb)]
			if slot.empty() || slot.id < id {
				sh.entries -= slot.size()
				slot.drop()
				slot.id = id
			}
			if slot.id == id && slot.put(r) {
				sh.entries++
			}
			sh.mu.Unlock()
		}
	}
	if d.bad {
		return fmt.Errorf("first sightings: %w", errRecord)
	}
	return nil
}

// loadLegacyFS reads the first sightings of a version 2 or 3 file, each
// as a counter of its one recipient beside the campaign's record (chunk
// 6): what the campaign's second message makes.
func (e *Embedded) loadLegacyFS(b []byte) error {
	d := &decoder{b: b}
	for len(d.b) > 0 && !d.bad {
		id := int64(d.u64())
		n := d.count(8 + 4)
		for range n {
			sig, fp := d.u64(), d.u32()
			if d.bad {
				break
			}
			sh := e.shard(sig)
			sh.mu.Lock()
			if c := sh.ctr[sig]; c == nil || c.last < id {
				if c != nil {
					sh.entries -= c.weight()
				}
				c = &ecounter{exact: map[pseudonym]int64{placeholder(fp): id}, counts: []bucketCount{{id, 1}}, last: id}
				sh.ctr[sig] = c
				sh.entries++
			}
			sh.mu.Unlock()
		}
	}
	if d.bad {
		return fmt.Errorf("first sightings: %w", errRecord)
	}
	return nil
}

// loadPacked reads packed pointers into ring r (their check bits are
// the ring's), and returns the buckets it read.
func (e *Embedded) loadPacked(b []byte, version uint32, r int, value func(id int64, v uint32) (uint32, bool)) ([]int64, error) {
	d := &decoder{b: b}
	nb := int64(e.c.nb)
	var ids []int64
	for len(d.b) > 0 && !d.bad {
		shard := int(d.u8())
		id := int64(d.u64())
		gbits := uint(27) // version 3: from n
		if version >= 4 {
			gbits = uint(d.u8())
		}
		n := d.count(8 + 4)
		if version < 4 {
			gbits = min(denseBits(n), 26)
		}
		if d.bad || shard >= embeddedShards || gbits > 26 {
			d.bad = true
			break
		}
		// Group bits beyond what 64 times the entries need (packBits'
		// forecast at a bucket's start) are damage that would cost 4
		// bytes a group to read and to save: 256 MiB at 26 bits for one
		// entry. Fewer lose nothing (the check is the saved hash's next
		// bits, and a bucket restarted mid-way still packs 256 times its
		// entries), so the table is read with fewer.
		gbits = min(gbits, groupBits(64*n))
		add := make([]hv, 0, n)
		for range n {
			h := d.u64()
			if v, ok := value(id, d.u32()); ok && !d.bad {
				add = append(add, hv{h, v})
			}
		}
		if d.bad || len(add) == 0 {
			continue
		}
		ids = append(ids, id)
		ps := &e.ptrs[shard]
		ps.mu.Lock()
		slot := &ps.ring(r)[mod(id, nb)]
		if slot.empty() || slot.id < id {
			ps.entries -= slot.size()
			slot.id, slot.gen, slot.t, slot.d = id, 0, nil, nil
		}
		if slot.id == id && slot.d == nil {
			slot.d = newDense(nil, add, gbits, ringCheckBits(r))
			ps.entries += slot.d.len()
		}
		ps.mu.Unlock()
	}
	if d.bad {
		return ids, fmt.Errorf("packed pointers: %w", errRecord)
	}
	return ids, nil
}

func (e *Embedded) loadCamps(b []byte) error {
	d := &decoder{b: b}
	for len(d.b) > 0 && !d.bad {
		ref := d.u32()
		m := cmeta{origin: d.u32()}
		m.first, m.last = int64(d.u64()), int64(d.u64())
		nets := d.take(2 * int(d.u8()))
		snds := d.take(2 * int(d.u8()))
		if d.bad || ref > refMask || len(nets) > 2*CampaignSetCap || len(snds) > 2*CampaignSetCap {
			d.bad = true
			break
		}
		sh := e.shard(campaignSig(ref))
		sh.mu.Lock()
		delete(sh.sets, ref)
		for i := 0; i+1 < len(nets) || i+1 < len(snds); i += 2 {
			var net, snd uint16
			if i+1 < len(nets) {
				net = binary.BigEndian.Uint16(nets[i:])
			}
			if i+1 < len(snds) {
				snd = binary.BigEndian.Uint16(snds[i:])
			}
			sh.addSets(ref, &m, net, snd)
		}
		sh.camps[ref] = m
		sh.mu.Unlock()
	}
	if d.bad {
		return fmt.Errorf("campaigns: %w", errRecord)
	}
	return nil
}
