package signature

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

const fixtureLexiconPath = "testdata/lexicon-20ng-600.bmlx"

// buildFixtureLexicon builds the committed fixture lexicon from the first
// 600 posts of the 20 Newsgroups training split (archive order), with the
// stand-in tokenizer and the default parameters.
func buildFixtureLexicon(t *testing.T) []byte {
	b := NewLexiconBuilder(BuilderOptions{})
	msgs := newsgroups(t, "train")
	for i := 0; i < 600; i++ {
		b.Add(textDoc(msgs[i*len(msgs)/600].Text))
	}
	p := DefaultLexiconParams()
	p.ContextMinCount = 3 // a 600-post corpus is too small for θ = 15
	l, err := b.Build(p)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := l.MarshalBinary()
	return raw
}

// The committed fixture lexicon is exactly what the builder makes from the
// corpus: the build is deterministic.
func TestFixtureLexiconReproducible(t *testing.T) {
	raw := buildFixtureLexicon(t)
	committed := testenv.Golden(t, fixtureLexiconPath, raw, *update)
	if !bytes.Equal(raw, committed) {
		t.Fatalf("rebuilding %s gave different bytes (%d vs %d): run with -update if the change is deliberate", fixtureLexiconPath, len(raw), len(committed))
	}
}

func fixtureSet(t testing.TB) *Set { return fixtureSetWith(t, nil) }

// fixtureSetWith is fixtureSet with the default parameters changed by edit.
func fixtureSetWith(t testing.TB, edit func(*SetParams)) *Set {
	t.Helper()
	raw, err := os.ReadFile(fixtureLexiconPath)
	if err != nil {
		t.Fatal(err)
	}
	lex, err := LoadLexicon(raw)
	if err != nil {
		t.Fatal(err)
	}
	p := DefaultSetParams()
	p.Secret, p.Lexicon = testSecret(t), lex
	if edit != nil {
		edit(&p)
	}
	s, err := NewSet(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type golden struct {
	Version  string    `json:"version"`
	Describe string    `json:"describe"`
	Keys     []string  `json:"keys"`
	Explain  []Explain `json:"explain"`
}

// Golden signatures guard stored counts: a change to any key for the same
// text, secret, lexicon and parameters must be deliberate, bump
// AlgorithmVersion (or CanonVersion), and rewrite these files with
// -update.
func TestGoldenSignatures(t *testing.T) {
	s := fixtureSet(t)
	files, _ := filepath.Glob("testdata/golden/fixtures/*.txt")
	if len(files) < 4 {
		t.Fatalf("found %d fixtures", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".txt")
		t.Run(name, func(t *testing.T) {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			keys, exps := s.Sign(textDoc(string(text)), nil, nil)
			g := golden{Version: s.Version(), Describe: s.Describe(), Explain: exps}
			for _, k := range keys {
				g.Keys = append(g.Keys, s.StoreID(k))
			}
			got, _ := json.MarshalIndent(g, "", "  ")
			got = append(got, '\n')
			want := testenv.Golden(t, filepath.Join("testdata/golden", name+".json"), got, *update)
			if !bytes.Equal(got, want) {
				var w golden
				_ = json.Unmarshal(want, &w)
				if w.Version == g.Version {
					t.Fatalf("keys changed without a version change (bump AlgorithmVersion or CanonVersion, then -update):\n got %s\nwant %s", got, want)
				}
				t.Fatalf("golden signatures changed (version %s → %s); run with -update if deliberate:\n got %s\nwant %s", w.Version, g.Version, got, want)
			}
		})
	}
}

func TestGoldenFixturesSign(t *testing.T) {
	s := fixtureSet(t)
	for _, name := range []string{"newsletter", "letter", "offer"} {
		text, _ := os.ReadFile("testdata/golden/fixtures/" + name + ".txt")
		_, exps := s.Sign(textDoc(string(text)), nil, nil)
		for _, e := range exps {
			if e.Family == FamilyCharShingle || e.Family == FamilyShingle || e.Family == FamilySift {
				if e.Keys == 0 {
					t.Errorf("%s: %s declined: %s", name, e.Family, e.Declined)
				}
			}
		}
	}
	_, exps := s.Sign(textDoc("Lunch?\n\nAre we still meeting tomorrow?"), nil, nil)
	for _, e := range exps {
		if e.Keys != 0 || e.Declined == "" {
			t.Errorf("short text: %s made %d keys (%q), want a decline", e.Family, e.Keys, e.Declined)
		}
	}
}

// TestShortMailingSigns: a mass mailing of one line and a link, in a
// language the lexicon does not cover, is too short for every family but
// character shingles (and the line family, which reads a line of any
// language); they sign it (40 letters and up), copies that differ
// in a number and the link share a key, and a different short text does
// not. Before BandUnits the family declined under 80 letters and such a
// campaign was never counted.
func TestShortMailingSigns(t *testing.T) {
	s := fixtureSet(t)
	sign := func(subject, body string) map[Key]bool {
		t.Helper()
		d := Canonicalize(Source{Subject: subject, Parts: []string{body}})
		keys, exps := s.Sign(d, nil, nil)
		out := map[Key]bool{}
		for _, k := range keys {
			if k.Family != FamilyCharShingle && k.Family != FamilyLines {
				t.Errorf("%s signed %q (want only charshingle and lines)", k.Family, body)
			}
			out[k] = true
		}
		for _, e := range exps {
			if e.Family == FamilyCharShingle && e.Keys == 0 {
				t.Fatalf("charshingle declined %q: %s (%s)", body, e.Declined, e.Detail)
			}
		}
		return out
	}
	a := sign("Часы и сумки со скидкой!", "Часы и сумки со скидкой 70% только сегодня на сайте http://www.example-shop.test")
	b := sign("Часы и сумки со скидкой!", "Часы и сумки со скидкой 60% только сегодня на сайте http://shop.example.test/x")
	c := sign("Новые книги недели", "Новые книги недели и подборка статей о путешествиях http://books.example.test")
	shared := func(x, y map[Key]bool) bool {
		for k := range x {
			if y[k] {
				return true
			}
		}
		return false
	}
	if !shared(a, b) {
		t.Error("two copies of the short mailing share no key")
	}
	if shared(a, c) {
		t.Error("a different short text shares a key with the mailing")
	}
}

// A short mailing sent under rotating subjects (cypherpunks: office rents,
// pills, casino bonuses, two or three subjects over one body) signs its
// body: every copy shares the character shingle keys whatever its Subject,
// while a body too short to sign alone is still signed with its Subject.
func TestShortMailingSubjects(t *testing.T) {
	s := fixtureSet(t)
	sign := func(subject, body string) map[Key]bool {
		t.Helper()
		keys, _ := s.Sign(Canonicalize(Source{Subject: subject, Parts: []string{body}}), nil, nil)
		out := map[Key]bool{}
		for _, k := range keys {
			if k.Family == FamilyCharShingle {
				out[k] = true
			}
		}
		return out
	}
	body := "Небольшие недорогие офисы в Москве! Спешите, вариантов все меньше и меньше! Район Преображенское, охрана, парковка"
	a := sign("Небольшие недорогие офисы в Москве!", body)
	b := sign("Недорого сдаем свои офисы в Москве!", body)
	if len(a) == 0 || !maps.Equal(a, b) {
		t.Errorf("one body under two subjects: %d and %d keys, equal %v; want the same keys", len(a), len(b), maps.Equal(a, b))
	}
	short := "Звоните сегодня" // under MinUnits letters alone
	c, d := sign("Небольшие недорогие офисы в Москве, охрана", short), sign("Недорого сдаем свои офисы в Москве, парковка", short)
	if len(c) == 0 || len(d) == 0 {
		t.Errorf("a short body with its Subject: %d and %d keys, want some", len(c), len(d))
	}
	for k := range c {
		if d[k] {
			t.Errorf("a short body under different subjects shares %v: the Subject must count where the body is too short", k)
		}
	}
}

// TestSubjectLetters: Doc.SubjectLetters ends the Subject's part of Letters.
func TestSubjectLetters(t *testing.T) {
	for _, c := range []struct{ subject, body, want string }{
		{"Hello there", "Good morning", "heiothere"},
		{"", "Good morning", ""},
		{"Only a subject", "", "oniyasubject"},
		{"Скидки до 80%", "на сумки", "скидкидо"},
	} {
		d := Canonicalize(Source{Subject: c.subject, Parts: []string{c.body}})
		if got := d.Letters[:d.SubjectLetters]; got != c.want {
			t.Errorf("%q / %q: subject letters %q, want %q (letters %q)", c.subject, c.body, got, c.want, d.Letters)
		}
	}
}

// The version changes with every input the keys depend on, and only then.
func TestVersionRules(t *testing.T) {
	base := fixtureSet(t)
	raw, _ := os.ReadFile(fixtureLexiconPath)
	lex, _ := LoadLexicon(raw)
	mk := func(mod func(*SetParams)) *Set {
		p := DefaultSetParams()
		p.Secret, p.Lexicon = testSecret(t), lex
		mod(&p)
		s, err := NewSet(p)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if v := mk(func(*SetParams) {}).Version(); v != base.Version() {
		t.Fatalf("same inputs, different version: %s vs %s", v, base.Version())
	}
	if !strings.HasPrefix(base.StoreID(Key{Family: FamilySift, Index: 1, Hash: 0xab}), base.Version()+":sift.1:00000000000000ab") {
		t.Errorf("StoreID = %q", base.StoreID(Key{Family: FamilySift, Index: 1, Hash: 0xab}))
	}
	other := NewLexiconBuilder(BuilderOptions{})
	for _, d := range smallLexiconDocs() {
		other.Add(d)
	}
	otherLex, err := other.Build(DefaultLexiconParams())
	if err != nil {
		t.Fatal(err)
	}
	changes := map[string]func(*SetParams){
		"secret":       func(p *SetParams) { p.Secret = secretN(t, 9) },
		"lexicon":      func(p *SetParams) { p.Lexicon = otherLex },
		"imatch K":     func(p *SetParams) { p.IMatch.Randomized = 10 },
		"hardening":    func(p *SetParams) { p.IMatch.Hardening = HardeningOff },
		"shingle rows": func(p *SetParams) { p.Shingle.Sample.Rows = 2 },
		"char width":   func(p *SetParams) { p.CharShingle.Width = 10 },
		"sift l":       func(p *SetParams) { p.Sift.ClusterLen = 6 },
		"disable sift": func(p *SetParams) { p.Sift.Enabled = false },
	}
	seen := map[string]string{base.Version(): "base"}
	for name, mod := range changes {
		s := mk(mod)
		if prev, dup := seen[s.Version()]; dup {
			t.Errorf("%s: version %s equals that of %s", name, s.Version(), prev)
		}
		seen[s.Version()] = name
		if strings.Contains(s.Describe(), "secret") || strings.Contains(s.Describe(), "k0") {
			t.Errorf("Describe leaks key material: %s", s.Describe())
		}
	}
	// Parameters of a disabled family do not matter.
	a := mk(func(p *SetParams) { p.Sift.Enabled = false })
	b := mk(func(p *SetParams) { p.Sift.Enabled = false; p.Sift.ClusterLen = 7 })
	if a.Version() != b.Version() {
		t.Error("a disabled family's parameters changed the version")
	}
}

// A Set signs like its families do separately, and keys from different
// secrets never coincide.
func TestSetMatchesFamilies(t *testing.T) {
	s := fixtureSet(t)
	raw, _ := os.ReadFile(fixtureLexiconPath)
	lex, _ := LoadLexicon(raw)
	sec := testSecret(t)
	im, _ := NewIMatch(sec, lex, DefaultIMatchParams())
	sh, _ := NewShingle(sec, lex, DefaultShingleParams())
	ch, _ := NewCharShingle(sec, DefaultCharShingleParams())
	sf, _ := NewSift(sec, DefaultSiftParams())
	ts, _ := NewTermSet(sec, lex, DefaultTermSetParams())
	ct, _ := NewContain(sec, lex, DefaultContainParams())
	ln, _ := NewLines(sec, DefaultLineParams())
	p := DefaultSetParams()
	p.Secret, p.Lexicon = secretN(t, 77), lex
	otherKey, err := NewSet(p)
	if err != nil {
		t.Fatal(err)
	}
	msgs := slices.Clone(newsgroups(t, "test")[:200])
	var long strings.Builder // signed with sifting beside the other families
	for _, m := range msgs {
		long.WriteString(m.Text)
	}
	msgs = append(msgs, corpusMsg{Name: "all of them", Text: long.String()})
	for _, m := range msgs {
		d := textDoc(m.Text)
		if m.Name == "all of them" && len(d.Tokens) < parallelTokens {
			t.Fatalf("the long document has %d tokens, want at least %d", len(d.Tokens), parallelTokens)
		}
		got, exps := s.Sign(d, nil, nil)
		var want []Key
		for _, f := range []Signer{im, sh, ch, sf, ts, ct, ln} {
			want, _ = f.Sign(d, want)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: Set keys differ from the families' keys", m.Name)
		}
		if len(exps) != 8 {
			t.Fatalf("got %d explanations, want 8", len(exps))
		}
		other, _ := otherKey.Sign(d, nil, nil)
		for _, k := range other {
			if slices.Contains(got, k) {
				t.Fatalf("%s: key %v produced under two secrets", m.Name, k)
			}
		}
	}
}

func TestSetConcurrent(t *testing.T) {
	s := fixtureSet(t)
	var docs []*Doc
	for _, m := range newsgroups(t, "test")[:64] {
		docs = append(docs, textDoc(m.Text))
	}
	want := make([][]Key, len(docs))
	for i, d := range docs {
		want[i], _ = s.Sign(d, nil, nil)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range 4 {
				for i := range docs {
					j := (i + g + r) % len(docs)
					got, _ := s.Sign(docs[j], nil, nil)
					if !slices.Equal(got, want[j]) {
						t.Errorf("concurrent signing changed the keys of doc %d", j)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
}

func TestNewSetErrors(t *testing.T) {
	p := DefaultSetParams()
	if _, err := NewSet(p); err == nil || !strings.Contains(err.Error(), "no secret") {
		t.Errorf("no secret: got %v", err)
	}
	p.Secret = testSecret(t)
	if _, err := NewSet(p); err == nil || !strings.Contains(err.Error(), "need a lexicon") {
		t.Errorf("no lexicon: got %v", err)
	}
	p.IMatch.Enabled, p.Shingle.Enabled = false, false
	p.Sift.ClusterLen, p.CharShingle.Width = 0, 1
	err := func() error { _, err := NewSet(p); return err }()
	for _, want := range []string{"sift cluster length", "char shingle width"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want it to mention %q", err, want)
		}
	}
	p = DefaultSetParams()
	p.Secret = testSecret(t)
	p.IMatch.Enabled, p.Shingle.Enabled, p.CharShingle.Enabled, p.Sift.Enabled, p.TermSet.Enabled, p.Contain.Enabled, p.Attach.Enabled, p.Lines.Enabled = false, false, false, false, false, false, false, false
	if _, err := NewSet(p); err == nil {
		t.Error("a set with no family was accepted")
	}
	// Character shingles and sifting need no lexicon.
	p.CharShingle.Enabled, p.Sift.Enabled = true, true
	if _, err := NewSet(p); err != nil {
		t.Errorf("lexicon-free set rejected: %v", err)
	}
}

// FuzzSigners: no Doc makes a signer panic, and signing is deterministic.
func FuzzSigners(f *testing.F) {
	s := fixtureSet(f)
	f.Add("Hello world, this is a perfectly ordinary message with some words in it.", "")
	f.Add("", "")
	f.Add("a", "\x00\xff")
	f.Add(strings.Repeat("spam ", 300), "ЦенаЦенаЦена価格")
	f.Add("x\x80\xfe y z", "abc")
	// lines: a long one twice, a quoted one, one after a separator, one
	// too short, CR LF and a lone CR
	f.Add("one two three four five six seven eight\r\none two three four five six seven eight\n> quoted words one two three four five six\nshort line\rnine ten eleven twelve thirteen fourteen fifteen sixteen\n-- \nsigned by a name with eight words in it\n", "A subject of eight words, one two three")
	f.Fuzz(func(t *testing.T, text, letters string) {
		d := &Doc{Tokens: strings.Fields(text), Letters: letters}
		d2 := textDoc(text)
		for _, doc := range []*Doc{d, d2, {Tokens: append(d.Tokens, ""), Letters: text}} {
			k1, e1 := s.Sign(doc, nil, nil)
			k2, _ := s.Sign(doc, nil, nil)
			if !slices.Equal(k1, k2) {
				t.Fatal("signing is not deterministic")
			}
			for i, e := range e1 {
				if (e.Keys == 0) != (e.Declined != "") {
					t.Fatalf("explain %d inconsistent: %+v", i, e)
				}
			}
			if len(k1) > 64 {
				t.Fatalf("%d keys for one message", len(k1))
			}
		}
		s.Sign(nil, nil, nil)
		// The line family on a canonical document: its keys are a set of
		// lines, so a part repeated adds none.
		once := lineKeys(s, Canonicalize(Source{Subject: letters, Parts: []string{text}}))
		twice := lineKeys(s, Canonicalize(Source{Subject: letters, Parts: []string{text, text}}))
		if len(once) > DefaultLineParams().Keys || !slices.Equal(once, twice) {
			t.Fatalf("line keys of one part %x, of the part twice %x", once, twice)
		}
	})
}

// lineKeys returns the hashes of the line family's keys of d.
func lineKeys(s *Set, d *Doc) []uint64 {
	keys, _ := s.Sign(d, nil, nil)
	var out []uint64
	for _, k := range keys {
		if k.Family == FamilyLines {
			out = append(out, k.Hash)
		}
	}
	return out
}

// A message's keys are one allocation once the set has seen as many: Sign
// starts the slice at the most keys it has made, not at 32 doubled to 64.
func TestSignKeysSizedOnce(t *testing.T) {
	s := fixtureSet(t)
	msgs := newsgroups(t, "test")
	most := 0
	for i := 0; i < 200; i++ {
		keys, _ := s.Sign(Canonicalize(Source{Subject: "s", Parts: []string{msgs[i].Text}}), nil, nil)
		most = max(most, len(keys))
	}
	if most <= 32 {
		t.Fatalf("the most keys of 200 posts is %d: no test of a slice past 32", most)
	}
	for i := 200; i < 260; i++ {
		keys, _ := s.Sign(Canonicalize(Source{Subject: "s", Parts: []string{msgs[i].Text}}), nil, nil)
		if len(keys) <= most && cap(keys) != most {
			t.Fatalf("post %d: %d keys in a slice of capacity %d, want %d (the most seen)", i, len(keys), cap(keys), most)
		}
		most = max(most, len(keys))
	}
}
