package eval

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-message"
	"golang.org/x/text/encoding/traditionalchinese"

	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/signature"
)

func fixture(t *testing.T, name string) *Mail {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(raw)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return m
}

// testResources are small word lists: the real ones come from corpora.
func testResources() *Resources {
	res := &Resources{Vocab: strings.Fields(`meeting project report budget schedule review team office
		quarter contract client market analysis system network server update version release
		garden weather holiday family dinner weekend travel music football library`)}
	res.Noise = []string{
		"The central bank said it would keep interest rates unchanged for the third month in a row, citing stable inflation.",
		"Crude oil prices rose sharply on Tuesday after producers agreed to cut output by two percent next quarter.",
		"The company reported a net profit of twelve million dollars, up from nine million a year earlier.",
	}
	return res
}

// visible returns what a reader sees of a raw message, as the pipeline
// extracts it.
func visible(raw []byte) (subject, text string) {
	t := mailtext.Extract(bytes.NewReader(raw), mailtext.DefaultLimits)
	var b strings.Builder
	for _, p := range t.Parts {
		b.WriteString(p.Text)
		b.WriteByte('\n')
	}
	return t.Subject, b.String()
}

func canonWords(subject, text string) []string {
	return signature.Canonicalize(signature.Source{Subject: subject, Parts: []string{text}}).Tokens
}

func TestLoad(t *testing.T) {
	m := fixture(t, "html.eml")
	if !strings.Contains(m.Plain, "Luxury watches") || !strings.Contains(m.HTML, "<b>not</b>") {
		t.Errorf("plain %q, html %q: want both alternatives decoded", m.Plain, m.HTML)
	}
	if m.Subject != "Watches – 70 % off this week" {
		t.Errorf("subject %q", m.Subject)
	}
	if strings.Contains(m.Plain+m.HTML, "AAECAw") {
		t.Error("the attachment was read as text")
	}
	c := fixture(t, "cyrillic.eml")
	if !strings.Contains(c.Plain, "Уважаемые коллеги") || c.Subject != "Семинар по налогам" {
		t.Errorf("koi8-r not decoded: subject %q, text %.40q", c.Subject, c.Plain)
	}
	// Big5 text without a charset (spam/00243 of the SpamAssassin corpus
	// is such a base) is read as the pipeline reads it, not as U+FFFD.
	big5, _ := traditionalchinese.Big5.NewEncoder().String("台北市最好的商用辦公室出租，適合各種商業需求！立即來電洽詢。")
	if b, err := Load([]byte("Subject: x\r\n\r\n" + big5)); err != nil || !strings.Contains(b.Plain, "商用辦公室出租") {
		t.Errorf("unlabelled Big5: %.40q, %v", b.Plain, err)
	}
	if _, err := Load([]byte("Subject: x\r\nContent-Type: image/png\r\n\r\nAAAA")); err == nil {
		t.Error("a message without text loaded")
	}
}

// parseMIME reads a message completely with go-message, as a strict reader.
func parseMIME(raw []byte) error {
	e, err := message.Read(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	return e.Walk(func(_ []int, part *message.Entity, err error) error {
		if err != nil {
			return err
		}
		if part.MultipartReader() == nil {
			_, err = bytes.NewBuffer(nil).ReadFrom(part.Body)
		}
		return err
	})
}

// TestEveryAttackMakesValidVariedCopies runs every attack on every fixture:
// each copy is valid MIME that a strict parser reads, the pipeline's
// extraction finds text in it, the same seed gives the same bytes, and
// attacks that randomise make copies that differ from each other.
func TestEveryAttackMakesValidVariedCopies(t *testing.T) {
	res := testResources()
	// none changes nothing; charset and alt-mismatch change the bytes, not
	// what the reader sees; hidden text only adds what the reader does not
	// see; markup inside words and character references change the HTML,
	// not the text.
	deterministic := map[string]bool{"none": true, "charset": true, "alt-mismatch": true}
	invisible := map[string]bool{"hidden-text": true, "tags-in-words": true, "entities": true}
	// The display-name attacks vary the To or Cc field, not the text.
	header := map[string]bool{"display-name": true, "display-name-short": true, "display-name-cc": true}
	for _, name := range []string{"plain.eml", "html.eml", "cyrillic.eml"} {
		base := fixture(t, name)
		for _, a := range Attacks() {
			t.Run(name+"/"+a.Name, func(t *testing.T) {
				var copies [][]byte
				for k := range 6 {
					mk := func() []byte {
						rng := rand.New(rand.NewPCG(7, uint64(k)))
						c := NewCopy(base, person(k, rng), rng, res)
						c.MsgID = fmt.Sprintf("t%d@example.com", k)
						return c.Apply(a)
					}
					raw := mk()
					if again := mk(); !bytes.Equal(raw, again) {
						t.Fatal("the same seed gave different copies")
					}
					if err := parseMIME(raw); err != nil {
						t.Fatalf("copy %d is not valid MIME: %v\n%s", k, err, raw)
					}
					if !bytes.Contains(raw, []byte("\r\nTo: ")) {
						t.Fatalf("copy %d has no To header", k)
					}
					subj, text := visible(raw)
					if len(canonWords(subj, text)) < 20 {
						t.Fatalf("copy %d: the pipeline reads only %q / %q", k, subj, text)
					}
					copies = append(copies, raw)
				}
				distinct := map[string]bool{}
				for _, c := range copies {
					subj, text := visible(c)
					if invisible[a.Name] {
						_, body, _ := bytes.Cut(c, []byte("\r\n\r\n"))
						text = string(body)
					}
					if header[a.Name] {
						text = string(c)
					}
					distinct[subj+"\n"+text] = true
				}
				if !deterministic[a.Name] && len(distinct) < 2 {
					t.Errorf("6 copies show the reader the same text: the attack varies nothing")
				}
			})
		}
	}
}

// TestTextSurvivesEncodings checks that charsets and transfer encodings
// change the bytes but not what the reader sees.
func TestTextSurvivesEncodings(t *testing.T) {
	for _, tc := range []struct {
		fixture  string
		charsets []string
	}{
		{"plain.eml", latinCharsets},
		{"html.eml", latinCharsets},
		{"cyrillic.eml", cyrillicCharsets},
	} {
		base := fixture(t, tc.fixture)
		want := NewCopy(base, Person{}, rand.New(rand.NewPCG(1, 1)), nil).Apply()
		ws, wt := visible(want)
		for _, cs := range tc.charsets {
			for _, cte := range transferCodings {
				c := NewCopy(base, Person{}, rand.New(rand.NewPCG(1, 1)), nil)
				if !c.CanEncode(cs) {
					t.Errorf("%s: cannot encode in %s", tc.fixture, cs)
					continue
				}
				c.Charset, c.Subj8, c.CTE = cs, cs, cte
				raw := c.Apply()
				if !bytes.Contains(raw, []byte(`charset="`+cs+`"`)) {
					t.Errorf("%s %s: label missing", tc.fixture, cs)
				}
				gs, gt := visible(raw)
				if !slices.Equal(canonWords(gs, gt), canonWords(ws, wt)) {
					t.Errorf("%s in %s/%q: the reader sees %q / %.80q, want %q / %.80q", tc.fixture, cs, cte, gs, gt, ws, wt)
				}
			}
		}
	}
	// Cyrillic letters do not fit Latin charsets.
	if fixture(t, "cyrillic.eml").CanEncode("iso-8859-1") {
		t.Error("Cyrillic text claimed encodable in ISO-8859-1")
	}
}

func TestIntelligentEditPositions(t *testing.T) {
	var in []string
	for i := 1; i <= 40; i++ {
		in = append(in, fmt.Sprintf("w%d", i))
	}
	text := strings.Join(in, " ")
	vocab := []string{"NEW"}
	rng := rand.New(rand.NewPCG(1, 2))
	run := func(kind int) []string {
		return strings.Fields(mapWords(text, intelligentEdit(kind, 8, rng, vocab)(len(in))))
	}
	// Adding: the new words are at positions 9, 19, 29, 39 of the output.
	add := run(editAdd)
	for i, w := range add {
		if (w == "NEW") != ((i+1)%10 == 9) {
			t.Fatalf("add: %v", add)
		}
	}
	// Deleting: words 9, 19, 29, 39 of the input are gone.
	del := run(editDelete)
	if len(del) != 36 || slices.Contains(del, "w9") || slices.Contains(del, "w19") || slices.Contains(del, "w29") || !slices.Contains(del, "w10") {
		t.Fatalf("delete: %v", del)
	}
	// Changing: words 9, 19, 29, 39 are replaced.
	chg := run(editChange)
	if len(chg) != 40 || chg[8] != "NEW" || chg[18] != "NEW" || chg[28] != "NEW" || chg[7] != "w8" || chg[9] != "w10" {
		t.Fatalf("change: %v", chg)
	}
	// Every window of ten consecutive input words holds an edit.
	for _, kind := range []int{editAdd, editDelete, editChange, editCombination} {
		out := mapWords(text, intelligentEdit(kind, 8, rng, vocab)(len(in)))
		kept := map[string]bool{}
		for _, w := range strings.Fields(out) {
			kept[w] = true
		}
		for start := 1; start+9 <= 40; start++ {
			clean := true
			for i := start; i < start+10; i++ {
				if !kept[fmt.Sprintf("w%d", i)] {
					clean = false
				}
			}
			// An addition sits between two kept words: check the output.
			if clean && kind != editAdd && kind != editCombination {
				t.Errorf("kind %d: input words %d–%d untouched", kind, start, start+9)
			}
		}
	}
}

func TestRandomEditCounts(t *testing.T) {
	var in []string
	for i := range 200 {
		in = append(in, fmt.Sprintf("w%d", i))
	}
	text := strings.Join(in, " ")
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct {
		kind          int
		words, edited int
	}{
		{editAdd, 220, 20}, {editDelete, 180, 20}, {editChange, 200, 20}, {editCombination, 200, 21},
	} {
		out := strings.Fields(mapWords(text, randomEdit(tc.kind, rng, []string{"NEW"})(len(in))))
		news := 0
		for _, w := range out {
			if w == "NEW" {
				news++
			}
		}
		missing := 0
		for _, w := range in {
			if !slices.Contains(out, w) {
				missing++
			}
		}
		if len(out) != tc.words {
			t.Errorf("kind %d: %d words, want %d", tc.kind, len(out), tc.words)
		}
		if edited := news + missing; tc.kind != editCombination && edited != tc.edited && edited != 2*tc.edited {
			t.Errorf("kind %d: %d new and %d missing words", tc.kind, news, missing)
		}
		if tc.kind == editCombination && (news != 14 || missing != 14) {
			// 7 added + 7 changed new words; 7 deleted + 7 changed missing.
			t.Errorf("combination: %d new and %d missing words, want 14 and 14", news, missing)
		}
	}
}

// TestHideTechniquesAreHidden checks that every hiding technique the
// hidden-text attack uses is invisible as the pipeline reads HTML, and that
// the visible text around it still is visible.
func TestHideTechniquesAreHidden(t *testing.T) {
	for _, tech := range hideTechniques {
		frag := fmt.Sprintf(tech, "zqxjunkword")
		if strings.Contains(tech, "%[2]d") {
			frag = fmt.Sprintf(tech, "zqxjunkword", 7)
		}
		raw := "Subject: x\r\nContent-Type: text/html\r\n\r\n<html><body><p>Visible before.</p>" + frag + "<p>Visible after.</p></body></html>"
		_, text := visible([]byte(raw))
		if strings.Contains(text, "zqxjunkword") || !strings.Contains(text, "Visible before") || !strings.Contains(text, "Visible after") {
			t.Errorf("%s: the reader sees %q", tech, text)
		}
	}
}

func TestPersonsAreDistinct(t *testing.T) {
	seen := map[string]bool{}
	for n := range 20000 {
		p := person(n, rand.New(rand.NewPCG(uint64(n), 9)))
		if seen[p.Address] {
			t.Fatalf("address %s given twice (serial %d)", p.Address, n)
		}
		seen[p.Address] = true
		if !strings.Contains(strings.ToLower(p.Address), strings.ToLower(p.First)) {
			t.Fatalf("%+v: the address does not carry the name", p)
		}
	}
}

// TestPersonalisationIsStripped checks that the pipeline's recipient
// stripping removes what personalise inserts into the visible text: the
// canonical words of personalised copies equal those of the plain copy
// once the recipient's words are removed.
func TestPersonalisationReachesTheText(t *testing.T) {
	base := fixture(t, "plain.eml")
	rng := rand.New(rand.NewPCG(5, 5))
	p := person(123, rng)
	c := NewCopy(base, p, rng, testResources())
	raw := c.Apply(trick("personalise"))
	subj, text := visible(raw)
	if !strings.Contains(subj+text, p.First) && !strings.Contains(subj+text, strings.ToUpper(p.First)) {
		t.Errorf("recipient %s not in %q / %q", p.Name, subj, text)
	}
	if !bytes.Contains(raw, []byte("To: "+p.Name+" <"+p.Address+">")) {
		t.Errorf("To header does not name %s <%s>:\n%s", p.Name, p.Address, raw[:200])
	}
}
