//go:build linux

package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// The snippets an admin pastes from the README and the docs are marked
// there with an HTML comment before the code block,
//
//	<!-- snippet: KIND -->
//
// and each kind is run against the program it configures, as written in
// the page: a broken copy in the README fails here. Every code block in
// these pages must carry a marker, so a new snippet cannot escape.
var snippetDocs = []string{"../README.md", "../docs/operations.md", "../docs/feedback.md", "../docs/refile.md", "README.md", "dovecot/README.md"}

// snippetKinds are the kinds of snippet and what checks them.
var snippetKinds = map[string]string{
	"postfix-main.cf": "TestPostfixSnippets: a real Postfix with these main.cf lines in front of milterd delivers mail tagged, and untagged when the daemon is down",
	"sendmail.mc":     "TestSendmailSnippets: a real Sendmail built from these .mc lines, likewise",
	"sieve":           "TestSieveSnippets: Dovecot runs the script on mail tagged by milterd through Postfix",
	"bulkmilter.yml":  "TestConfigSnippets: the configuration parser accepts the YAML",
	"systemd":         "TestSystemdSnippets: systemd-analyze verify accepts the unit with this drop-in",
	"shell":           "TestShellSnippets: the programs exist, repository paths exist, milterd's commands and flags exist",
	"text":            "not pasted: output, usage or a diagram",
}

type snippet struct {
	doc  string
	line int // of the block's first line
	kind string
	text string // the block without its indentation or fences
}

func (s snippet) String() string { return fmt.Sprintf("%s:%d (%s)", s.doc, s.line, s.kind) }

// name is the snippet's subtest name, without slashes.
func (s snippet) name() string {
	return fmt.Sprintf("%s:%d", strings.ReplaceAll(strings.TrimPrefix(s.doc, "../"), "/", "_"), s.line)
}

var markerRE = regexp.MustCompile(`^(\s*)<!-- snippet: (\S+) -->\s*$`)

// parseSnippets returns the marked blocks of a markdown page and the
// lines of code blocks that carry no marker.
func parseSnippets(doc, text string) (snips []snippet, unmarked []int, errs []string) {
	lines := strings.Split(text, "\n")
	prevNonBlank := func(i int) int {
		for j := i - 1; j >= 0; j-- {
			if strings.TrimSpace(lines[j]) != "" {
				return j
			}
		}
		return -1
	}
	indent := func(l string) int { return len(l) - len(strings.TrimLeft(l, " ")) }
	// block reads the code block starting at line i: fenced, or indented
	// at least four columns beyond base. It returns the text and the
	// index of the line after it.
	block := func(i, base int) (string, int) {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
			ind := indent(lines[i])
			var b []string
			j := i + 1
			for ; j < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[j]), "```"); j++ {
				b = append(b, strings.TrimPrefix(lines[j], strings.Repeat(" ", ind)))
			}
			return strings.Join(b, "\n") + "\n", j + 1
		}
		ind := indent(lines[i])
		var b []string
		j := i
		for ; j < len(lines); j++ {
			l := lines[j]
			if strings.TrimSpace(l) == "" {
				// A blank line continues the block if it goes on after it.
				k := j
				for k < len(lines) && strings.TrimSpace(lines[k]) == "" {
					k++
				}
				if k < len(lines) && indent(lines[k]) >= ind && indent(lines[k]) >= base+4 {
					b = append(b, "")
					continue
				}
				break
			}
			if indent(l) < base+4 {
				break
			}
			b = append(b, strings.TrimPrefix(l, strings.Repeat(" ", ind)))
		}
		for len(b) > 0 && b[len(b)-1] == "" {
			b = b[:len(b)-1]
		}
		return strings.Join(b, "\n") + "\n", j
	}
	inFence := false
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if m := markerRE.FindStringSubmatch(l); m != nil {
			j := i + 1
			for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
				j++
			}
			if j == len(lines) {
				errs = append(errs, fmt.Sprintf("%s:%d: marker without a code block", doc, i+1))
				continue
			}
			if _, ok := snippetKinds[m[2]]; !ok {
				errs = append(errs, fmt.Sprintf("%s:%d: unknown snippet kind %q", doc, i+1, m[2]))
			}
			isFence := strings.HasPrefix(strings.TrimSpace(lines[j]), "```")
			if !isFence && indent(lines[j]) < len(m[1])+4 {
				errs = append(errs, fmt.Sprintf("%s:%d: marker not followed by a code block", doc, i+1))
				continue
			}
			text, next := block(j, len(m[1]))
			first := j + 1
			if isFence {
				first++
			}
			snips = append(snips, snippet{doc: doc, line: first, kind: m[2], text: text})
			i = next - 1
			continue
		}
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			if !inFence {
				unmarked = append(unmarked, i+1)
			}
			inFence = !inFence
			continue
		}
		if inFence || trimmed == "" || indent(l) < 4 {
			continue
		}
		// An indented code block: after a blank line, under a top-level
		// paragraph (not inside a list item or a table).
		p := prevNonBlank(i)
		if p < 0 || p == i-1 || indent(lines[p]) != 0 {
			continue
		}
		if pl := lines[p]; strings.HasPrefix(pl, "- ") || strings.HasPrefix(pl, "* ") || strings.HasPrefix(pl, "|") || regexp.MustCompile(`^\d+\. `).MatchString(pl) {
			continue
		}
		unmarked = append(unmarked, i+1)
		_, next := block(i, 0)
		i = next - 1
	}
	return snips, unmarked, errs
}

var (
	snippetsOnce sync.Once
	allSnips     []snippet
	snippetErrs  []string
)

// snippets returns every marked snippet of snippetDocs.
func snippets(t *testing.T) []snippet {
	t.Helper()
	snippetsOnce.Do(func() {
		for _, doc := range snippetDocs {
			b, err := os.ReadFile(doc)
			if err != nil {
				snippetErrs = append(snippetErrs, err.Error())
				continue
			}
			s, unmarked, errs := parseSnippets(doc, string(b))
			allSnips = append(allSnips, s...)
			snippetErrs = append(snippetErrs, errs...)
			for _, l := range unmarked {
				snippetErrs = append(snippetErrs, fmt.Sprintf("%s:%d: a code block without a <!-- snippet: KIND --> marker", doc, l))
			}
		}
	})
	if len(snippetErrs) > 0 {
		t.Fatalf("snippet markers:\n%s", strings.Join(snippetErrs, "\n"))
	}
	return allSnips
}

func snippetsOf(t *testing.T, kind string) []snippet {
	t.Helper()
	var out []snippet
	for _, s := range snippets(t) {
		if s.kind == kind {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s snippet found; is the marker right?", kind)
	}
	return out
}

// Every code block in the pages is marked with a known kind, and the
// parser finds them (a marker that no longer precedes its block fails).
func TestSnippetsMarked(t *testing.T) {
	counts := map[string]int{}
	for _, s := range snippets(t) {
		counts[s.kind]++
		if strings.TrimSpace(s.text) == "" {
			t.Errorf("%v: empty block", s)
		}
	}
	for kind := range snippetKinds {
		if counts[kind] == 0 {
			t.Errorf("no snippet of kind %s", kind)
		}
	}
	t.Logf("snippets by kind: %v", counts)

	// The parser itself: an unmarked block is found, fenced or indented.
	_, unmarked, _ := parseSnippets("t.md", "Text:\n\n    code\n\n```\nfenced\n```\n\n- item\n\n    list continuation\n")
	if fmt.Sprint(unmarked) != "[3 5]" {
		t.Errorf("unmarked blocks at %v, want [3 5]", unmarked)
	}
	// And the shell splitter: quotes hold separators, comments go.
	got := fmt.Sprintf("%q", shellCommands("sed 's|a|b|' f > g && x \"y z\" # c; d\nrm -rf a; tar \\\n  -C b\n"))
	if want := `[["sed" "s|a|b|" "f" ">" "g"] ["x" "y z"] ["rm" "-rf" "a"] ["tar" "-C" "b"]]`; got != want {
		t.Errorf("shellCommands = %s, want %s", got, want)
	}
}

// The configuration snippets parse, every key known and every value valid.
func TestConfigSnippets(t *testing.T) {
	for _, s := range snippetsOf(t, "bulkmilter.yml") {
		if _, err := config.Parse([]byte(s.text), s.String()); err != nil {
			t.Errorf("%v:\n%v", s, err)
		}
	}
}

// The systemd drop-ins, beside the shipped unit: systemd-analyze verify
// accepts them (it warns about an unknown setting in a drop-in, which a
// control with a misspelt one checks).
func TestSystemdSnippets(t *testing.T) {
	analyze := testenv.Program(t, "systemd-analyze")
	unit, err := os.ReadFile("systemd/bulkmilter.service")
	if err != nil {
		t.Fatal(err)
	}
	verify := func(dropin string) string {
		dir := t.TempDir()
		path := filepath.Join(dir, "bulkmilter.service")
		if err := os.WriteFile(path, bytes.ReplaceAll(unit, []byte("/usr/bin/milterd"), []byte(milterdBin(t))), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(path+".d", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path+".d", "override.conf"), []byte(dropin), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := run(t, dir, analyze, "verify", path)
		if err != nil {
			out += "\n" + err.Error()
		}
		return out
	}
	if out := verify("[Service]\nReadWritePath=/var/spool/postfix/bulkmilter\n"); !strings.Contains(out, "ReadWritePath") {
		t.Fatalf("systemd-analyze verify did not read the drop-in (no warning about a misspelt setting):\n%s", out)
	}
	for _, s := range snippetsOf(t, "systemd") {
		if out := verify(s.text); strings.Contains(out, "bulkmilter.service") || strings.Contains(out, "override.conf") {
			t.Errorf("%v: systemd-analyze verify:\n%s", s, out)
		}
	}
}

var repoPathRE = regexp.MustCompile(`^(?:\./)?(?:deploy|scripts|docs|cmd|config|internal|bundled|metrics|milter|detect|store|signature|mailtext|feedback|daemon|admin|lab|mailbox)(?:/\S*)?$`)

// ourCommand returns NAME when word runs one of the repository's
// commands: NAME, bin/NAME (built there by go build -o bin/) or, with
// "go run", ./cmd/NAME.
func ourCommand(word string) (string, bool) {
	name := strings.TrimPrefix(strings.TrimPrefix(word, "./cmd/"), "bin/")
	if strings.ContainsAny(name, "/.") || name == "" {
		return "", false
	}
	fi, err := os.Stat(filepath.Join("../cmd", name))
	return name, err == nil && fi.IsDir()
}

// The shell snippets name programs that exist, repository files that
// exist (a Go pattern's directory), and commands of this repository with
// subcommands and flags that exist (checked against the built binary's
// -h; "go run ./cmd/X" and "bin/X" count as X).
func TestShellSnippets(t *testing.T) {
	builtins := map[string]bool{"export": true, "cd": true}
	for _, s := range snippetsOf(t, "shell") {
		t.Run(s.name(), func(t *testing.T) {
			for _, cmd := range shellCommands(s.text) {
				for _, tok := range cmd {
					if repoPathRE.MatchString(tok) {
						path := strings.TrimSuffix(strings.TrimSuffix(tok, "/..."), "...")
						if m, _ := filepath.Glob(filepath.Join("..", path)); len(m) == 0 {
							t.Errorf("%v: %q names %s, which is not in the repository", s, strings.Join(cmd, " "), tok)
						}
					}
				}
				for len(cmd) > 0 && strings.Contains(cmd[0], "=") {
					cmd = cmd[1:] // VAR=value before the command
				}
				if len(cmd) == 0 || builtins[cmd[0]] {
					continue
				}
				if cmd[0] == "go" && len(cmd) > 2 && cmd[1] == "run" {
					if name, ok := ourCommand(cmd[2]); ok {
						checkCommand(t, s, binary(t, name), cmd[3:])
						continue
					}
				}
				if name, ok := ourCommand(cmd[0]); ok {
					checkCommand(t, s, binary(t, name), cmd[1:])
					continue
				}
				if strings.HasPrefix(cmd[0], "scripts/") {
					if fi, err := os.Stat(filepath.Join("..", cmd[0])); err != nil || fi.Mode()&0o111 == 0 {
						t.Errorf("%v: %s is not an executable script in the repository", s, cmd[0])
					}
					continue
				}
				testenv.Program(t, cmd[0])
			}
		})
	}
}

// shellCommands splits a shell snippet into commands of words: lines
// joined at a trailing backslash, comments dropped, split at ;, &&, ||
// and | outside quotes; quotes are removed from the words.
func shellCommands(text string) [][]string {
	var cmds [][]string
	var cmd []string
	var word strings.Builder
	inWord := false
	endWord := func() {
		if inWord {
			cmd = append(cmd, word.String())
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(cmd) > 0 {
			cmds = append(cmds, cmd)
		}
		cmd = nil
	}
	text = strings.ReplaceAll(text, "\\\n", " ")
	var quote rune
	for i := 0; i < len(text); i++ {
		c := rune(text[i])
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				word.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == '#' && !inWord:
			for i < len(text) && text[i] != '\n' {
				i++
			}
			endCmd()
		case c == '\n' || c == ';' || c == '|' || c == '&' && i+1 < len(text) && text[i+1] == '&':
			if c == '&' || c == '|' && i+1 < len(text) && text[i+1] == '|' {
				i++
			}
			endCmd()
		case c == ' ' || c == '\t':
			endWord()
		default:
			word.WriteRune(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

// checkCommand checks that "BIN ARGS" names a command (and a subcommand)
// that exists and only flags it lists in its -h.
func checkCommand(t *testing.T, s snippet, bin string, args []string) {
	t.Helper()
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	if len(words) == 0 && filepath.Base(bin) == "milterd" {
		words = []string{"run"} // milterd's default command
	}
	if len(words) == 0 {
		t.Errorf("%v: %s %s: no command", s, filepath.Base(bin), strings.Join(args, " "))
		return
	}
	// The command; and its subcommand when the command's own help (or
	// complaint) names the next word. Nothing runs but -h.
	help := func(w ...string) (string, error) {
		out, err := exec.Command(bin, append(w, "-h")...).CombinedOutput()
		return string(out), err
	}
	out, err := help(words[0])
	if len(words) > 1 && regexp.MustCompile(`\b`+regexp.QuoteMeta(words[1])+`\b`).MatchString(out) {
		words = words[:2]
		out, err = help(words...)
	} else {
		words = words[:1]
	}
	if err != nil || strings.Contains(out, "unknown command") || strings.Contains(out, "unknown subcommand") {
		t.Errorf("%v: %s %s -h: %v\n%s", s, filepath.Base(bin), strings.Join(words, " "), err, out)
		return
	}
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		flag, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(flag) + `\b`).MatchString(out) {
			t.Errorf("%v: %s %s has no flag -%s:\n%s", s, filepath.Base(bin), strings.Join(words, " "), flag, out)
		}
	}
}

// The Go the README tells a source builder to install can build the
// module: its version is at least go.mod's go line, and the README's
// "Go 1.N" is that release.
func TestReadmeGoVersion(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	need := regexp.MustCompile(`(?m)^go (\d+)\.(\d+)(?:\.(\d+))?$`).FindSubmatch(gomod)
	got := regexp.MustCompile(`go(\d+)\.(\d+)(?:\.(\d+))?\.linux-amd64\.tar\.gz`).FindSubmatch(readme)
	if need == nil || got == nil {
		t.Fatalf("go.mod's go line %q or the README's Go download %q not found", need, got)
	}
	num := func(m [][]byte) [3]int {
		var v [3]int
		for i := range 3 {
			fmt.Sscan(string(m[i+1]), &v[i])
		}
		return v
	}
	n, g := num(need), num(got)
	if g[0] < n[0] || g[0] == n[0] && (g[1] < n[1] || g[1] == n[1] && g[2] < n[2]) {
		t.Errorf("README installs Go %v, go.mod needs %v", g, n)
	}
	if want := fmt.Sprintf("Go %d.%d", n[0], n[1]); !bytes.Contains(readme, []byte("needs "+want)) {
		t.Errorf("README does not say the module needs %s", want)
	}
}
