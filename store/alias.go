package store

import (
	"fmt"
	"sync"
)

// aliasBook is the embedded store's side of the stored merge (model.go):
// every merged campaign's root and the bucket of its merge, and every
// root's parts. Its lock is taken while the message's pointer shards are
// held and never while taking another lock.
type aliasBook struct {
	mu    sync.Mutex
	root  map[uint32]part   // part ref -> {root, bucket of the merge}
	parts map[uint32][]part // root -> its parts
}

// resolve reads every live pointer naming a merged campaign as its root
// (the key's weak events kept).
func (ab *aliasBook) resolve(kps []keyPtr, oldest int64) {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	if len(ab.root) == 0 {
		return
	}
	for i, kp := range kps {
		if !kp.found {
			continue
		}
		if a, ok := ab.root[kp.p.ref()]; ok && a.at >= oldest {
			kps[i].p = makePtr(a.ref, kp.p.switches()).withClass(kp.p.class())
		}
	}
}

// live reports whether a live alias names ref (freeRef skips it).
func (ab *aliasBook) live(ref uint32, oldest int64) bool {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	a, ok := ab.root[ref]
	return ok && a.at >= oldest
}

// partsOf returns root's live parts; the caller holds ab.mu.
func (ab *aliasBook) partsOf(root uint32, oldest int64) []part {
	var out []part
	for _, p := range ab.parts[root] {
		if p.at >= oldest {
			out = append(out, p)
		}
	}
	return out
}

// merge makes the refs of merged parts of root at bucket cb (mergeParts)
// and returns root's live parts and the parts new to it.
func (ab *aliasBook) merge(root uint32, merged []uint32, cb, oldest int64) (out, added []part) {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	have := ab.partsOf(root, oldest)
	if len(merged) == 0 {
		return have, nil
	}
	out, added = mergeParts(root, have, merged, cb, func(r uint32) []part { return ab.partsOf(r, oldest) })
	if len(added) == 0 {
		return have, nil
	}
	if ab.root == nil {
		ab.root, ab.parts = map[uint32]part{}, map[uint32][]part{}
	}
	for _, p := range added {
		ab.root[p.ref] = part{root, p.at}
		delete(ab.parts, p.ref)
	}
	ab.parts[root] = out
	return out, added
}

// put records, from a state file, that ref is a part of root since
// bucket at.
func (ab *aliasBook) put(ref, root uint32, at int64) {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	if ab.root == nil {
		ab.root, ab.parts = map[uint32]part{}, map[uint32][]part{}
	}
	if old, ok := ab.root[ref]; ok {
		ab.parts[old.ref] = deletePart(ab.parts[old.ref], ref)
	}
	ab.root[ref] = part{root, at}
	ab.parts[root] = append(deletePart(ab.parts[root], ref), part{ref, at})
}

func deletePart(ps []part, ref uint32) []part {
	for i, p := range ps {
		if p.ref == ref {
			return append(ps[:i:i], ps[i+1:]...)
		}
	}
	return ps
}

// sweep drops the aliases that left the window.
func (ab *aliasBook) sweep(oldest int64) {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	for ref, a := range ab.root {
		if a.at < oldest {
			delete(ab.root, ref)
		}
	}
	for root, ps := range ab.parts {
		live := ps[:0]
		for _, p := range ps {
			if p.at >= oldest {
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			delete(ab.parts, root)
		} else {
			ab.parts[root] = live
		}
	}
}

// size returns the live aliases.
func (ab *aliasBook) size() int {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	return len(ab.root)
}

// appendAliases appends the live aliases as the state file's chunk 12
// records: u32 part ref, u32 root, i64 bucket of the merge.
func (ab *aliasBook) appendAliases(b []byte, oldest int64) []byte {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	for ref, a := range ab.root {
		if a.at >= oldest {
			b = le32(b, ref)
			b = le32(b, a.ref)
			b = le64(b, uint64(a.at))
		}
	}
	return b
}

// loadAliases reads chunk 12.
func (e *Embedded) loadAliases(b []byte) error {
	d := &decoder{b: b}
	for len(d.b) > 0 && !d.bad {
		ref, root, at := d.u32(), d.u32(), int64(d.u64())
		if d.bad || ref > refMask || root > refMask || ref == root {
			d.bad = true
			break
		}
		e.aliases.put(ref, root, at)
	}
	if d.bad {
		return fmt.Errorf("aliases: %w", errRecord)
	}
	return nil
}
