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

// Load reads, parses and validates the configuration file at path, and
// checks that the files it names can be read.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, lines, probs := parse(data, path)
	probs = append(probs, c.checkFiles(lines)...)
	if len(probs) > 0 {
		return nil, probs.sorted()
	}
	return c, nil
}

// Parse parses and validates a configuration held in data; file names it
// in messages. Values not in data keep their defaults. Every problem is
// reported, not only the first: syntax errors (the parse resumes after the
// offending line), unknown and repeated keys, values of the wrong type and
// invalid values.
func Parse(data []byte, file string) (*Config, error) {
	c, _, probs := parse(data, file)
	if len(probs) > 0 {
		return nil, probs.sorted()
	}
	return c, nil
}

func parse(data []byte, file string) (*Config, lineIndex, Problems) {
	c := Default()
	c.file = file
	orig := strings.Split(string(data), "\n")
	root, data, probs := parseTree(data, file)
	if root == nil {
		return &c, nil, probs
	}
	lines := indexLines(root)
	for _, p := range probs {
		p.Path = lines.guessPath(orig, p.Line)
	}
	s := &schema{file: file, lines: strings.Split(string(data), "\n")}
	s.check(root, reflect.TypeFor[Config](), reflect.ValueOf(Default()), "", "")
	probs = append(probs, s.probs...)
	if err := decode(data, &c); err != nil && len(s.probs) == 0 {
		// The schema check and yaml.v3 disagree: report yaml.v3's words
		// rather than accept the file.
		probs = append(probs, &Problem{File: file, Msg: err.Error(), Hint: "please report this message as a bug in milterd check-config"})
	}
	if len(root.Content) == 0 || root.Content[0].Kind == yaml.MappingNode {
		probs = append(probs, c.validate(lines).except(s.refused)...)
	}
	if extra := secondDocument(data); extra > 0 {
		probs = append(probs, &Problem{File: file, Line: extra, Msg: "more than one YAML document", Hint: "remove the --- line and what follows it"})
	}
	return &c, lines, probs
}

// decode decodes data into c strictly. Values the schema check refused
// keep their defaults; the rest is decoded.
func decode(data []byte, c *Config) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// secondDocument returns the line of a second YAML document in data, or
// 0: yaml.v3 would silently ignore it.
func secondDocument(data []byte) int {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first, extra yaml.Node
	if dec.Decode(&first) != nil || dec.Decode(&extra) != nil {
		return 0
	}
	return max(extra.Line, 1)
}

// Validate checks a configuration built in code (for example defaults with
// flags applied) and returns every problem.
func (c *Config) Validate() error {
	if probs := c.validate(nil); len(probs) > 0 {
		return probs
	}
	return nil
}

// sorted orders problems by line; problems without a line come last.
func (ps Problems) sorted() Problems {
	sort.SliceStable(ps, func(i, j int) bool {
		li, lj := ps[i].Line, ps[j].Line
		if li == 0 || lj == 0 {
			return lj == 0 && li != 0
		}
		return li < lj
	})
	return ps
}

// except drops the problems at a refused path or below it: a value of
// the wrong type kept its default, which says nothing about what the
// admin meant.
func (ps Problems) except(refused []string) Problems {
	var out Problems
next:
	for _, p := range ps {
		for _, r := range refused {
			if p.Path == r || strings.HasPrefix(p.Path, r+".") || strings.HasPrefix(p.Path, r+"[") {
				continue next
			}
		}
		out = append(out, p)
	}
	return out
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

var keyRE = regexp.MustCompile(`^[ \t]*(?:- )?([A-Za-z_][A-Za-z0-9_]*)[ \t]*:`)

// guessPath names the key on a line the parser could not read: the key
// written there under the section of the nearest line above it that is
// indented less. "" when the line holds no key.
func (idx lineIndex) guessPath(lines []string, n int) string {
	if n < 1 || n > len(lines) {
		return ""
	}
	m := keyRE.FindStringSubmatch(lines[n-1])
	if m == nil {
		return ""
	}
	indent := indentOf(lines[n-1])
	for i := n - 1; i >= 1 && indent > 0; i-- {
		l := lines[i-1]
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "#") || indentOf(l) >= indent {
			continue
		}
		best := ""
		for p, line := range idx {
			if line == i && len(p) > len(best) {
				best = p
			}
		}
		if best == "" {
			return ""
		}
		return best + "." + m[1]
	}
	return m[1]
}
