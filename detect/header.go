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
// field by field: 52 objects for 20 fields of 12 names, where build makes 7
// (and one string for all the folded values, which were one each).
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
	// A folded value is unfolded into unfolded, at spans[i]; build turns
	// them all into one string (unfolding each was an object a field).
	unfolded []byte
	spans    []span
	texts    []string // canonical names kept among the text fields
	order    []int32  // scratch: indexes sorted by name
}

// span is a value's place in fieldList.unfolded; empty for a value kept
// as it came.
type span struct{ from, to int32 }

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
	l.keys, l.values, l.texts, l.spans = l.keys[:0], l.values[:0], l.texts[:0], l.spans[:0]
	l.unfolded = l.unfolded[:0]
	if cap(l.unfolded) > 1<<20 {
		l.unfolded = nil
	}
}

// add keeps a field, name trimmed, as Header.Add would keep it with its
// value unfolded.
func (l *fieldList) add(name, value string) {
	k := textproto.CanonicalMIMEHeaderKey(name)
	if textField(name) && !slices.Contains(l.texts, k) {
		l.texts = append(l.texts, k)
	}
	sp := span{}
	if hasLineBreak(value) {
		sp.from = int32(len(l.unfolded))
		l.unfolded = appendUnfolded(l.unfolded, value)
		sp.to, value = int32(len(l.unfolded)), ""
	}
	l.keys, l.values, l.spans = append(l.keys, k), append(l.values, value), append(l.spans, sp)
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
	h.l = make([]*goField, n)
	l.order = l.order[:0]
	unfolded := string(l.unfolded)
	for i := range n {
		v := l.values[i]
		if sp := l.spans[i]; sp.to > sp.from {
			v = unfolded[sp.from:sp.to]
		}
		fields[i] = goField{k: l.keys[i], v: v}
		h.l[i] = &fields[i]
		l.order = append(l.order, int32(i))
	}
	// One array holds every name's fields, each name's in arrival order;
	// each name's slice is capped so that an append (HeaderFields.Del, a
	// later Add) never writes into the next name's.
	slices.SortStableFunc(l.order, func(a, b int32) int { return strings.Compare(l.keys[a], l.keys[b]) })
	byName := make([]*goField, n)
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
	unfolded := string(l.unfolded)
	for i, k := range l.keys {
		v := l.values[i]
		if sp := l.spans[i]; sp.to > sp.from {
			v = unfolded[sp.from:sp.to]
		}
		h.Add(k, v)
	}
	return h
}
