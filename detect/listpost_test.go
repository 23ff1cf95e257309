package detect

import (
	"slices"
	"strings"
	"testing"

	"github.com/emersion/go-message/textproto"

	"github.com/bulkmilter/bulkmilter/bundled"
	"github.com/bulkmilter/bulkmilter/signature"
)

// TestListPostOwnText: with own_text on the word families, two posts of a
// discussion list (List-Id) that share only the thread they quote and the
// list's footer share no word-shingle or containment key; the same two
// messages without list headers (a sender's own mail) are read whole and
// share the footer's keys.
func TestListPostOwnText(t *testing.T) {
	lex, err := bundled.Lexicon()
	if err != nil {
		t.Fatal(err)
	}
	p := signature.DefaultSetParams()
	p.Lexicon = lex
	p.Contain.Enabled = true
	p.Shingle.OwnText, p.Contain.OwnText = true, true
	if p.Secret, err = signature.NewSecret([]byte("detect test secret, not for production")); err != nil {
		t.Fatal(err)
	}
	set, err := signature.NewSet(p)
	if err != nil {
		t.Fatal(err)
	}
	th := map[signature.Family]int{}
	for _, s := range set.Signers() {
		th[s.Family()] = threshold
	}
	e, err := New(Options{Set: set, Store: emptyStore(t), Thresholds: th})
	if err != nil {
		t.Fatal(err)
	}
	thread := "Our garden club meets every Thursday evening in the library. This month we discuss how to prepare the soil for winter, which vegetables can stay in the ground, and how to protect young trees from frost and hungry animals. Members who grew tomatoes this summer will share seeds and tell us what worked and what did not."
	footer := strings.Repeat("This list is sponsored by a company that sells fast servers and storage for open source projects. Visit their website today for a free trial and special offers.\n", 3)
	own := []string{
		"I tried the new release on my laptop yesterday and the installer failed when it tried to write the configuration file. Has anyone seen the same problem, and is there a workaround until the next version? I would rather not downgrade because the old one has the memory leak we talked about last month.",
		"Thanks for the report. The configuration writer changed in this release: it now refuses a directory it cannot lock. Check that nothing else holds the lock, or remove the stale lock file by hand, then run the installer again. We will add a clearer message to the next version and document the change in the release notes.",
	}
	keys := func(list bool, body string) []signature.Key {
		var h textproto.Header
		h.Set("Subject", "Re: installer fails")
		h.Set("Content-Type", "text/plain; charset=utf-8")
		if list {
			h.Set("List-Id", "Users of the project <users.example.org>")
		}
		a := e.Analyze(&Message{Header: h, Body: strings.NewReader(body), Recipients: []string{"r@example.test"}})
		var out []signature.Key
		for _, k := range a.Keys {
			if k.Family == signature.FamilyShingle || k.Family == signature.FamilyContain {
				out = append(out, k)
			}
		}
		return out
	}
	shared := func(list bool) int {
		var ks [2][]signature.Key
		for i, o := range own {
			body := "On Monday, someone wrote:\n> " + strings.ReplaceAll(thread, "\n", "\n> ") + "\n" + o + "\n\n-------------------------------------------------------\n" + footer
			if ks[i] = keys(list, body); len(ks[i]) == 0 {
				t.Fatalf("list %v: post %d has no word-shingle or containment key", list, i)
			}
		}
		n := 0
		for _, k := range ks[0] {
			if slices.Contains(ks[1], k) {
				n++
			}
		}
		return n
	}
	if n := shared(true); n != 0 {
		t.Errorf("two list posts share %d word-shingle and containment keys through their quote and footer, want 0", n)
	}
	if n := shared(false); n == 0 {
		t.Errorf("the same messages without list headers share no key: the footer and quote should be read")
	}
}
