package detect

import (
	"fmt"
	"net/textproto"
	"reflect"
	"slices"
	"strings"
	"unsafe"

	mtextproto "github.com/emersion/go-message/textproto"
)

// fieldList is the header a Builder keeps, in arrival order, built into
// go-message's Header once, when the message is read: Header.Add made
// each field a struct, a slice per name and grew the list and the map
// field by field: 52 objects for 20 fields of 12 names, where build makes 6
// (the values come unfolded, from the Builder's arena).
//
// go-message has no way to build a Header from a list, so build writes
// its two fields through goHeader, a copy of its layout (v0.18.2), whose
// result TestBuildHeader and FuzzBuildHeader compare with Header.Add's.
// The layout is checked against the library's when the program starts
// (layoutErr): a build against another go-message whose Header differs
// falls back to Header.Add, slower but never writing through a wrong
// layout, whether or not our tests ran on it.
type fieldList struct {
	keys, values []string // canonical names (as Header.Add has them), values
	texts        []string // canonical names kept among the text fields
	order        []int32  // scratch: indexes sorted by name
	arena        arena    // the values unfolded, HeaderBytes' fields
}

// arena holds a message's header bytes (the fields the milter hands over
// as bytes, the unfolded values) in one buffer, as strings that point into
// it: 23 objects a message in the milter's allocation profile were one
// string a field. Bytes are only ever appended, and Reset lets the buffer
// go rather than reuse it, so a string stays valid wherever it is kept.
// Past limit bytes a message (hostile headers) it makes a string each as
// before, so that it never holds more than limit beyond what was kept.
type arena struct {
	buf  []byte
	used int // bytes of the current message
	// next is the first buffer's size: a quarter above the larger of the
	// last message's bytes and a slowly decaying memory of larger ones, so
	// that most messages take one buffer.
	next  int
	limit int // Limits.HeaderBytes; 0 keeps nothing in the arena
}

func (a *arena) reset() {
	a.next = min(max(a.used+a.used/4, a.next-a.next/4, 1024), 8<<10)
	a.buf, a.used = nil, 0
}

// room reports whether n more bytes go into the arena, taking a new
// buffer when the current one is full.
func (a *arena) room(n int) bool {
	if a.used+n > a.limit {
		return false
	}
	a.used += n
	if cap(a.buf)-len(a.buf) < n {
		a.buf = make([]byte, 0, max(n, a.next, 2*cap(a.buf)))
	}
	return true
}

// str returns p's bytes as a string.
func (a *arena) str(p []byte) string {
	if len(p) == 0 || !a.room(len(p)) {
		return string(p)
	}
	a.buf = append(a.buf, p...)
	return unsafe.String(&a.buf[len(a.buf)-len(p)], len(p))
}

// unfold is unfold(v) with the result in the arena.
func (a *arena) unfold(v string) string {
	if !hasLineBreak(v) || !a.room(len(v)) {
		return unfold(v)
	}
	from := len(a.buf)
	a.buf = appendUnfolded(a.buf, v) // no more than len(v): never grows
	if len(a.buf) == from {
		return ""
	}
	return unsafe.String(&a.buf[from], len(a.buf)-from)
}

// goHeader and goField are go-message's textproto.Header and headerField.
type goHeader struct {
	l []*goField // in the order added (Add appends; Fields reads backwards)
	m map[string][]*goField
}

type goField struct {
	//lint:ignore U1000 never read here, but part of go-message's layout
	b    []byte // the raw field; nil for a field added by name and value
	k, v string
}

// layoutErr says why goHeader and goField are not go-message's Header
// and headerField, field for field (names, kinds, types, offsets, sizes);
// nil when build may write through them.
var layoutErr = sameLayout(reflect.TypeOf(goHeader{}), reflect.TypeOf(mtextproto.Header{}))

func sameLayout(ours, theirs reflect.Type) error {
	if ours.Kind() != reflect.Struct || theirs.Kind() != reflect.Struct ||
		ours.Size() != theirs.Size() || ours.NumField() != theirs.NumField() {
		return fmt.Errorf("%v is %d bytes; go-message's %v %d", ours, ours.Size(), theirs, theirs.Size())
	}
	for i := range ours.NumField() {
		o, g := ours.Field(i), theirs.Field(i)
		if o.Name != g.Name || o.Offset != g.Offset || o.Type.Kind() != g.Type.Kind() || o.Type.Size() != g.Type.Size() {
			return fmt.Errorf("%v field %d: %s %v at %d; go-message's: %s %v at %d", ours, i, o.Name, o.Type, o.Offset, g.Name, g.Type, g.Offset)
		}
		// Follow pointers, slices and maps down to the field struct.
		ot, gt := o.Type, g.Type
		for ot.Kind() == reflect.Pointer || ot.Kind() == reflect.Slice || ot.Kind() == reflect.Map {
			if ot.Kind() == reflect.Map && (ot.Key() != gt.Key()) {
				return fmt.Errorf("%v field %s: map key %v; go-message's %v", ours, o.Name, ot.Key(), gt.Key())
			}
			ot, gt = ot.Elem(), gt.Elem()
			if ot.Kind() != gt.Kind() {
				return fmt.Errorf("%v field %s: %v; go-message's %v", ours, o.Name, o.Type, g.Type)
			}
		}
		if ot.Kind() == reflect.Struct {
			if err := sameLayout(ot, gt); err != nil {
				return err
			}
		} else if ot != gt {
			return fmt.Errorf("%v field %s: %v; go-message's %v", ours, o.Name, o.Type, g.Type)
		}
	}
	return nil
}

func (l *fieldList) reset() {
	clear(l.keys) // no message's strings kept past it
	clear(l.values)
	clear(l.texts)
	l.keys, l.values, l.texts = l.keys[:0], l.values[:0], l.texts[:0]
	l.arena.reset()
}

// add keeps a field, name trimmed, as Header.Add would keep it with its
// value unfolded; text is textField(name), which the caller has.
func (l *fieldList) add(name, value string, text bool) {
	k := textproto.CanonicalMIMEHeaderKey(name)
	if text && !slices.Contains(l.texts, k) {
		l.texts = append(l.texts, k)
	}
	l.keys, l.values = append(l.keys, k), append(l.values, l.arena.unfold(value))
}

// hasText is Header.Has for a name textField accepts.
func (l *fieldList) hasText(name string) bool {
	return slices.Contains(l.texts, textproto.CanonicalMIMEHeaderKey(name))
}

// build returns the fields as a Header equal to one that Header.Add made
// field by field; the Header shares nothing with the list.
func (l *fieldList) build() mtextproto.Header {
	n := len(l.keys)
	if n == 0 {
		return mtextproto.Header{}
	}
	if layoutErr != nil {
		return l.buildByAdd()
	}
	fields := make([]goField, n)
	var h goHeader
	// h.l and byName share one array; h.l is capped so that an append
	// to it never writes into byName.
	ptrs := make([]*goField, 2*n)
	h.l = ptrs[:n:n]
	l.order = l.order[:0]
	for i := range n {
		fields[i] = goField{k: l.keys[i], v: l.values[i]}
		h.l[i] = &fields[i]
		l.order = append(l.order, int32(i))
	}
	// One array holds every name's fields, each name's in arrival order;
	// each name's slice is capped so that an append (HeaderFields.Del, a
	// later Add) never writes into the next name's.
	slices.SortStableFunc(l.order, func(a, b int32) int { return strings.Compare(l.keys[a], l.keys[b]) })
	byName := ptrs[n:]
	names := 1
	for i, j := range l.order {
		byName[i] = &fields[j]
		if i > 0 && l.keys[j] != l.keys[l.order[i-1]] {
			names++
		}
	}
	h.m = make(map[string][]*goField, names)
	for start := 0; start < n; {
		k, end := l.keys[l.order[start]], start+1
		for end < n && l.keys[l.order[end]] == k {
			end++
		}
		h.m[k] = byName[start:end:end]
		start = end
	}
	return *(*mtextproto.Header)(unsafe.Pointer(&h))
}

// buildByAdd is build through Header.Add, field by field: what build does
// when go-message's layout is not goHeader's.
func (l *fieldList) buildByAdd() mtextproto.Header {
	var h mtextproto.Header
	for i, k := range l.keys {
		h.Add(k, l.values[i])
	}
	return h
}
