package config

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// schema checks a parsed YAML tree against the Config struct before it is
// decoded: every unknown or repeated key and every value of the wrong type
// becomes a Problem with its line, key path and a hint an admin can act on.
// yaml.v3 itself reports these as "cannot unmarshal !!seq into string",
// and its custom-type errors stop the decoding at the first one.
type schema struct {
	file  string
	lines []string // the file's lines, to quote a value as written
	probs Problems
	// refused are the paths whose values were refused: they kept their
	// defaults, which validation need not judge.
	refused []string
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// check walks node n, whose Go type is t and whose default value is def,
// at key path path; key is the key n is the value of, for hints.
func (s *schema) check(n *yaml.Node, t reflect.Type, def reflect.Value, path, key string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			s.check(c, t, def, path, key)
		}
		return
	}
	if n.ShortTag() == "!!null" {
		return // "key:" with no value keeps the default, as yaml.v3 does
	}
	switch {
	case reflect.PointerTo(t).Implements(unmarshalerType) || isScalar(t):
		s.scalar(n, t, def, path, key)
	case t.Kind() == reflect.Struct:
		if n.Kind != yaml.MappingNode {
			s.refuse(n, path, fmt.Sprintf("expected a section of keys, got %s", describe(n)), sectionHint(n, t, key))
			return
		}
		s.mapping(n, path, func(k *yaml.Node, v *yaml.Node, p string) {
			i := fieldIndex(t, k.Value)
			if i < 0 {
				s.add(k, path, fmt.Sprintf("unknown key %q", k.Value), unknownKeyHint(k.Value, yamlKeys(t), keyPaths()[k.Value]))
				return
			}
			s.check(v, t.Field(i).Type, def.Field(i), p, k.Value)
		})
	case t.Kind() == reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			s.refuse(n, path, fmt.Sprintf("expected a list, got %s", describe(n)), listHint(n, key))
			return
		}
		for i, c := range n.Content {
			s.check(c, t.Elem(), reflect.Value{}, fmt.Sprintf("%s[%d]", path, i), key)
		}
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			s.refuse(n, path, fmt.Sprintf("expected name: value pairs, got %s", describe(n)),
				fmt.Sprintf("write one name: value per line, indented below %s:, or {name: value, …} on one line", key))
			return
		}
		s.mapping(n, path, func(k *yaml.Node, v *yaml.Node, p string) {
			s.check(v, t.Elem(), reflect.Value{}, p, k.Value)
		})
	}
}

// mapping calls f on each key and value of a mapping, reporting keys given
// twice (yaml.v3 would report only the first repeat, and only when decoding).
func (s *schema) mapping(n *yaml.Node, path string, f func(k, v *yaml.Node, p string)) {
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.Value == "<<" {
			// A merge key: its mappings hold keys of this section.
			for v.Kind == yaml.AliasNode && v.Alias != nil {
				v = v.Alias
			}
			srcs := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				srcs = v.Content
			}
			for _, src := range srcs {
				for src.Kind == yaml.AliasNode && src.Alias != nil {
					src = src.Alias
				}
				if src.Kind == yaml.MappingNode {
					s.mapping(src, path, f)
				}
			}
			continue
		}
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		if first, ok := seen[k.Value]; ok {
			s.add(k, p, fmt.Sprintf("key %q given twice (first on line %d)", k.Value, first), "remove one of them")
			continue
		}
		seen[k.Value] = k.Line
		f(k, v, p)
	}
}

// scalar checks a value that must be a single scalar of type t by
// decoding it with yaml.v3, exactly as the real decoding will.
func (s *schema) scalar(n *yaml.Node, t reflect.Type, def reflect.Value, path, key string) {
	want := expected(t)
	if n.Kind != yaml.ScalarNode {
		hint := "write a single value"
		if t.Kind() == reflect.String {
			hint = s.quoteHint(n, key)
		}
		s.refuse(n, path, fmt.Sprintf("expected %s, got %s", want, describe(n)), hint)
		return
	}
	err := n.Decode(reflect.New(t).Interface())
	if err == nil {
		return
	}
	msg := fmt.Sprintf("expected %s, got %s", want, describe(n))
	deflt := "" // "; the default is key: value", when the key has one
	if def.IsValid() {
		deflt = fmt.Sprintf("; the default is %s: %v", key, def.Interface())
	}
	var hint string
	switch t {
	case reflect.TypeFor[Duration]():
		hint = `write a duration such as "500ms", "30s", "24h" or "7d"`
	case reflect.TypeFor[Size]():
		hint = `write a size such as 65536, "512KiB" or "4MiB"`
	default:
		switch t.Kind() {
		case reflect.Int, reflect.Int64:
			hint = "write digits without quotes or units" + deflt
		case reflect.Bool:
			hint = "write true or false without quotes" + deflt
		case reflect.Float64:
			hint = "write a number without quotes, such as 0.5" + deflt
		}
	}
	s.refuse(n, path, msg, hint)
}

func (s *schema) add(n *yaml.Node, path, msg, hint string) {
	s.probs = append(s.probs, &Problem{File: s.file, Line: n.Line, Path: path, Msg: msg, Hint: hint})
}

// refuse reports a value that cannot be used.
func (s *schema) refuse(n *yaml.Node, path, msg, hint string) {
	s.add(n, path, msg, hint)
	s.refused = append(s.refused, path)
}

// quoteHint explains that an unquoted [ ] or { } (or "a: b") is YAML
// structure, not text, and shows the value quoted as written.
func (s *schema) quoteHint(n *yaml.Node, key string) string {
	if n.Style&yaml.FlowStyle != 0 && n.Line >= 1 && n.Line <= len(s.lines) && n.Column >= 1 && n.Column <= len(s.lines[n.Line-1]) {
		text := stripComment(s.lines[n.Line-1][n.Column-1:])
		if text != "" && (text[0] == '[' || text[0] == '{') {
			what := "a list"
			if n.Kind == yaml.MappingNode {
				what = "a mapping"
			}
			return fmt.Sprintf("unquoted, %c starts %s: quote the text, e.g. %s: %s", text[0], what, key, strconv.Quote(text))
		}
	}
	return fmt.Sprintf("quote the text: unquoted, [ ], { } and \"a: b\" are YAML structure, e.g. %s: \"[BULK]\"", key)
}

// stripComment removes a trailing " # comment" and spaces.
func stripComment(s string) string {
	if i := strings.Index(s, " #"); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func isScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Float64:
		return true
	}
	return false
}

// expected names what a value of type t looks like.
func expected(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[Duration]():
		return "a duration"
	case reflect.TypeFor[Size]():
		return "a size"
	}
	switch t.Kind() {
	case reflect.String:
		return "text"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	}
	return t.String()
}

// describe names what a node holds, quoting a scalar's value.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping (key: value)"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	return strconv.Quote(v)
}

func sectionHint(n *yaml.Node, t reflect.Type, key string) string {
	keys := yamlKeys(t)
	if key == "" {
		return "write the configuration as key: value lines; top-level keys: " + strings.Join(keys, ", ")
	}
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "://") && fieldIndex(t, "url") >= 0 {
		return fmt.Sprintf("%s is a section: write the URL on the next line, indented, as url: %s", key, n.Value)
	}
	return fmt.Sprintf("%s is a section: write its keys on the lines below, indented (keys: %s)", key, strings.Join(keys, ", "))
}

func listHint(n *yaml.Node, key string) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf("write a list, e.g. %s: [%s], or one \"- item\" per line below", key, n.Value)
	}
	return fmt.Sprintf("write a list, e.g. %s: [a, b], or one \"- item\" per line below", key)
}

func unknownKeyHint(key string, keys, elsewhere []string) string {
	hint := "valid keys here: " + strings.Join(keys, ", ")
	if len(elsewhere) > 3 {
		elsewhere = append(elsewhere[:3:3], "…")
	}
	if len(elsewhere) > 0 {
		return fmt.Sprintf("%s is a key of another section: %s; %s", key, strings.Join(elsewhere, ", "), hint)
	}
	best, bestD := "", 3
	for _, k := range keys {
		if d := editDistance(strings.ToLower(key), k); d < bestD {
			best, bestD = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf("did you mean %q? %s", best, hint)
	}
	return hint
}

// keyPaths maps every key of the schema to the dotted paths it has.
var keyPaths = sync.OnceValue(func() map[string][]string {
	paths := map[string][]string{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for i := 0; i < t.NumField(); i++ {
			name := yamlName(t.Field(i))
			if name == "" {
				continue
			}
			p := name
			if prefix != "" {
				p = prefix + "." + name
			}
			paths[name] = append(paths[name], p)
			if ft := t.Field(i).Type; ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(unmarshalerType) {
				walk(ft, p)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	return paths
})

// fieldIndex returns the index of the field of struct t with YAML key
// name, or -1.
func fieldIndex(t reflect.Type, name string) int {
	for i := 0; i < t.NumField(); i++ {
		if yamlName(t.Field(i)) == name {
			return i
		}
	}
	return -1
}

func yamlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	name := strings.Split(f.Tag.Get("yaml"), ",")[0]
	if name == "-" {
		return ""
	}
	return name
}

// yamlKeys lists the YAML keys of struct t, sorted.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		if k := yamlName(t.Field(i)); k != "" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
