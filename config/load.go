package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	File string
	Line int    // 0 when the problem has no place in the file
	Path string // dotted key path, e.g. "store.redis.url"
	Msg  string
	Hint string // how to fix it; may be empty
}

func (p *Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			b.WriteString(":" + strconv.Itoa(p.Line))
		}
		b.WriteString(": ")
	} else if p.Line > 0 {
		b.WriteString("line " + strconv.Itoa(p.Line) + ": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Msg)
	if p.Hint != "" {
		b.WriteString(" (" + p.Hint + ")")
	}
	return b.String()
}

// Problems is every problem found in a configuration; it is an error.
type Problems []*Problem

func (ps Problems) Error() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.Error()
	}
	return strings.Join(s, "\n")
}

// fieldError is returned by the custom YAML types; it carries a hint.
type fieldError struct {
	line int
	msg  string
	hint string
}

func (e *fieldError) Error() string { return e.msg }

// Load reads, parses and validates the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, path)
}

// Parse parses and validates a configuration held in data; file names it
// in messages. Values not in data keep their defaults.
func Parse(data []byte, file string) (*Config, error) {
	c := Default()
	c.file = file
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Problems{syntaxProblem(file, err)}
	}
	lines := indexLines(&root)
	if len(bytes.TrimSpace(data)) > 0 {
		if probs := decodeStrict(data, &c, file, lines); len(probs) > 0 {
			return nil, probs
		}
	}
	if probs := c.validate(lines); len(probs) > 0 {
		return nil, probs
	}
	return &c, nil
}

// Validate checks a configuration built in code (for example defaults with
// flags applied) and returns every problem.
func (c *Config) Validate() error {
	if probs := c.validate(nil); len(probs) > 0 {
		return probs
	}
	return nil
}

var lineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

func syntaxProblem(file string, err error) *Problem {
	msg := err.Error()
	p := &Problem{File: file, Msg: msg, Hint: "fix the YAML syntax"}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		p.Line, _ = strconv.Atoi(m[1])
		p.Msg = m[2]
	}
	return p
}

var unknownFieldRE = regexp.MustCompile(`^field (\S+) not found in type (\S+)$`)

// decodeStrict decodes data into c, rejecting unknown keys, and turns every
// decoding error into a Problem.
func decodeStrict(data []byte, c *Config, file string, lines lineIndex) Problems {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	err := dec.Decode(c)
	if err == nil || errors.Is(err, io.EOF) {
		if err == nil {
			// A second document would be silently ignored otherwise.
			var extra yaml.Node
			if dec.Decode(&extra) == nil {
				return Problems{{File: file, Line: extra.Line, Msg: "more than one YAML document", Hint: "remove the second document"}}
			}
		}
		return nil
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return Problems{{File: file, Line: fe.line, Path: lines.path(fe.line), Msg: fe.msg, Hint: fe.hint}}
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return Problems{{File: file, Msg: err.Error()}}
	}
	var probs Problems
	for _, s := range te.Errors {
		p := &Problem{File: file, Msg: s}
		if m := lineRE.FindStringSubmatch(s); m != nil {
			p.Line, _ = strconv.Atoi(m[1])
			p.Msg = m[2]
		}
		if m := unknownFieldRE.FindStringSubmatch(p.Msg); m != nil {
			p.Msg = fmt.Sprintf("unknown key %q", m[1])
			if keys := keysOf(m[2]); len(keys) > 0 {
				p.Hint = "valid keys here: " + strings.Join(keys, ", ")
			}
			p.Path = lines.parent(p.Line)
		} else {
			p.Path = lines.path(p.Line)
			p.Msg = strings.Replace(p.Msg, "cannot unmarshal ", "cannot use ", 1)
		}
		probs = append(probs, p)
	}
	return probs
}

// keysOf lists the YAML keys of the config struct type with the given Go
// name (as yaml.v3 prints it, e.g. "config.Store").
func keysOf(typeName string) []string {
	var found []string
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		if t.String() == typeName {
			for i := 0; i < t.NumField(); i++ {
				if tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]; tag != "" && tag != "-" {
					found = append(found, tag)
				}
			}
		}
		for i := 0; i < t.NumField(); i++ {
			walk(t.Field(i).Type)
		}
	}
	walk(reflect.TypeOf(Config{}))
	sort.Strings(found)
	return found
}

// lineIndex maps dotted key paths to the lines they are on, and back.
type lineIndex map[string]int

func indexLines(root *yaml.Node) lineIndex {
	idx := lineIndex{}
	var walk func(n *yaml.Node, prefix string)
	walk = func(n *yaml.Node, prefix string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, prefix)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if prefix != "" {
					p = prefix + "." + p
				}
				idx[p] = n.Content[i].Line
				walk(n.Content[i+1], p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", prefix, i)
				idx[p] = c.Line
				walk(c, p)
			}
		}
	}
	walk(root, "")
	return idx
}

// line returns the line of a path, or of its nearest ancestor in the file.
func (idx lineIndex) line(path string) int {
	for p := path; p != ""; {
		if l, ok := idx[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

// path returns the deepest key path on a line.
func (idx lineIndex) path(line int) string {
	best := ""
	for p, l := range idx {
		if l == line && len(p) > len(best) {
			best = p
		}
	}
	return best
}

// parent returns the path of the mapping that holds the key on a line.
func (idx lineIndex) parent(line int) string {
	p := idx.path(line)
	if i := strings.LastIndexAny(p, ".["); i >= 0 {
		return p[:i]
	}
	return ""
}
