package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxSyntaxProblems bounds how many syntax errors are collected before the
// rest of the file is given up on.
const maxSyntaxProblems = 20

// parseTree parses data into a YAML tree. A syntax error stops yaml.v3 at
// the first one, so on an error the offending line (with the lines
// indented below it) is blanked and the parse repeated, to report every
// syntax error and then everything else the rest of the file gets wrong in
// the same run. It returns the tree (nil when nothing could be parsed),
// the data it was parsed from (with the blanked lines) and the syntax
// problems.
func parseTree(data []byte, file string) (*yaml.Node, []byte, Problems) {
	var probs Problems
	for range maxSyntaxProblems {
		var root yaml.Node
		err := yaml.Unmarshal(data, &root)
		if err == nil {
			return &root, data, probs
		}
		lines := strings.Split(string(data), "\n")
		n := min(errorLine(lines, err), len(lines))
		if n == 0 {
			break
		}
		probs = append(probs, syntaxProblem(file, n, lines[n-1], err))
		blank(lines, n)
		next := []byte(strings.Join(lines, "\n"))
		if string(next) == string(data) {
			break // nothing left to blank: give up on the rest
		}
		data = next
	}
	return nil, data, probs
}

// errorLine finds the line of a syntax error. yaml.v3's own line numbers
// are off by one for some errors and missing for errors on the first line,
// so the file is cut after each line in turn: the error is on the first
// line whose prefix fails the same way the whole file does (or, if none
// does, on the first line whose prefix fails at all). 0 when no prefix
// fails.
func errorLine(lines []string, err error) int {
	if len(lines) > maxScanLines {
		return yamlLine(err)
	}
	want := syntaxMessage(err)
	first := 0
	for n := 1; n <= len(lines); n++ {
		var root yaml.Node
		perr := yaml.Unmarshal([]byte(strings.Join(lines[:n], "\n")), &root)
		if perr == nil {
			continue
		}
		if syntaxMessage(perr) == want {
			return n
		}
		if first == 0 {
			first = n
		}
	}
	return first
}

// maxScanLines bounds the files errorLine cuts line by line (a square of
// the length in parsing); longer ones get yaml.v3's line.
const maxScanLines = 1000

var yamlLineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): `)

func yamlLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 1
}

// blank empties line n (1-based) and the lines indented below it, which
// belong to it and would otherwise be misread as belonging to the line
// above.
func blank(lines []string, n int) {
	indent := indentOf(lines[n-1])
	lines[n-1] = ""
	for i := n; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if t != "" && !strings.HasPrefix(t, "#") && indentOf(lines[i]) <= indent {
			break
		}
		lines[i] = ""
	}
}

func indentOf(line string) int {
	return len(line) - len(strings.TrimLeft(line, " \t"))
}

var yamlErrorRE = regexp.MustCompile(`^(?:yaml: )?(?:line \d+: )?(.*)$`)

// syntaxMessage is yaml.v3's error without its prefix and line.
func syntaxMessage(err error) string {
	return yamlErrorRE.FindStringSubmatch(err.Error())[1]
}

// syntaxProblem turns a yaml.v3 syntax error on a line into words for an
// admin, with a hint on the usual cause.
func syntaxProblem(file string, n int, line string, err error) *Problem {
	raw := syntaxMessage(err)
	p := &Problem{File: file, Line: n}
	lead := line[:indentOf(line)]
	value := ""
	if _, v, ok := strings.Cut(line, ": "); ok {
		value = strings.TrimSpace(v)
	}
	switch {
	case strings.Contains(lead, "\t") || strings.Contains(raw, "tab character"):
		p.Msg, p.Hint = "a tab in the indentation", "indent with spaces only; YAML does not allow tabs there"
	case strings.Contains(raw, "cannot start any token") && value != "":
		p.Msg = fmt.Sprintf("a value cannot start with %q", value[:1])
		p.Hint = fmt.Sprintf("quote the value, e.g. %s %q", strings.TrimSpace(strings.SplitN(line, ": ", 2)[0])+":", stripComment(value))
	case strings.Contains(raw, "mapping values are not allowed"):
		p.Msg = `a second ": " on the line`
		p.Hint = `quote a value that contains ": ", e.g. key: "a: b"; or check this line's indentation`
	case strings.Contains(raw, "unexpected end of stream"), strings.Contains(raw, "found unknown escape"):
		p.Msg = "a quoted value that is not closed"
		p.Hint = `close the quote on the same line; inside "…" write \" for a quote and \\ for a backslash`
	case strings.Contains(raw, "expected ',' or ']'"):
		p.Msg, p.Hint = "a list opened with [ is not closed", `close it with ] on the same line, or quote the value if the brackets are text ("[BULK]")`
	case strings.Contains(raw, "expected ',' or '}'"):
		p.Msg, p.Hint = "a mapping opened with { is not closed", "close it with } on the same line, or quote the value if the braces are text"
	case strings.Contains(raw, "did not find expected node content"):
		p.Msg, p.Hint = "a value that is not complete", "close any [ or { on the same line, or quote the value if the brackets are text"
	case strings.Contains(raw, "did not find expected key"), strings.Contains(raw, "did not find expected '-'"):
		p.Msg, p.Hint = "the indentation does not match the lines above", "indent the keys of one section by the same number of spaces"
	case strings.Contains(raw, "could not find expected ':'"):
		p.Msg, p.Hint = `a line that is not "key: value"`, "write key: value, or start the line with # to make it a comment"
	case strings.Contains(raw, "unknown anchor"):
		p.Msg, p.Hint = "a value starting with * names an anchor that does not exist", `quote the value if the * is text, e.g. key: "*"`
	default:
		p.Msg = "YAML syntax error: " + raw
		p.Hint = "check the quoting and indentation of this line"
	}
	return p
}
