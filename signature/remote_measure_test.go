package signature

import (
	"bufio"
	"bytes"
	"flag"
	"io"
	"net/mail"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/lab/corpus"
	"github.com/bulkmilter/bulkmilter/mailbox"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"golang.org/x/net/publicsuffix"
)

var remoteShow = flag.Int("remote-show", 10, "TestMeasureRemoteImageHam: the shared keys to print")

// TestMeasureRemoteImageHam makes synthetic image-only ham out of every
// ham message of the corpora that shows remote images: its text left out,
// its images kept, which is what an image-only newsletter or receipt is,
// so that the remote-image key (AttachParams.Remote) signs it. It counts
// the senders (From address, and its registrable domain) that share a
// key, for the key over the set of image paths and, for comparison, over
// the set of file names; and the messages the key signs as they are,
// with their own text (docs/evaluation.md, "Remote images").
func TestMeasureRemoteImageHam(t *testing.T) {
	if !*measure {
		t.Skip("measurement; run with -measure")
	}
	a, err := NewAttach(testSecret(t), DefaultAttachParams())
	if err != nil {
		t.Fatal(err)
	}
	type use struct {
		msgs    int
		senders map[string]int // registrable domain of From
		addrs   map[string]int // From address
		classes map[string]int
		example string
	}
	variants := []struct {
		name string
		norm func([]string) []string
	}{
		{"paths", func(p []string) []string { return p }},
		{"file names", func(p []string) []string {
			out := make([]string, len(p))
			for i, s := range p {
				out[i] = path.Base(s)
			}
			return out
		}},
	}
	sp := DefaultSetParams()
	sp.Secret = testSecret(t)
	sp.Lexicon = bundledLexicon(t)
	set, err := NewSet(sp)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]map[Key]*use, len(variants))
	for i := range keys {
		keys[i] = map[Key]*use{}
	}
	withImages := map[string]int{}
	all := map[string]int{}
	asIs := map[string]int{} // messages the remote key signs with their own text
	type rec struct {
		name, sender string
		images       []string
		asIs         bool          // the remote key signs it with its own text
		class        func() string // read after the walk: a sidecar index comes last
	}
	var recs []rec
	add := func(r rec) {
		class := r.class()
		all[class]++
		if len(r.images) == 0 {
			return
		}
		withImages[class]++
		if r.asIs {
			asIs[class]++
		}
		for i, v := range variants {
			ks, _ := a.signRemote(&Doc{Images: v.norm(r.images)}, nil)
			u := keys[i][ks[0]]
			if u == nil {
				u = &use{senders: map[string]int{}, addrs: map[string]int{}, classes: map[string]int{}, example: r.name + " " + strings.Join(v.norm(r.images), " ")}
				keys[i][ks[0]] = u
			}
			u.msgs++
			u.senders[senderDomainOf(r.sender)]++
			u.addrs[r.sender]++
			u.classes[class]++
		}
	}
	walk := func(rel, class string, filter func(string) bool, labels map[string]bool) {
		opts := mailbox.Options{
			MaxSize: -1,
			Filter:  filter,
			OnSkip:  func(string, error) error { return nil },
		}
		if labels != nil {
			opts.Hooks = mailbox.Hooks{
				Sidecar:     "index",
				ReadSidecar: func(name string, r io.Reader) error { return corpus.TRECIndex(name, r, labels) },
			}
		}
		err := opts.Walk(corpusFile(t, rel), func(m *mailbox.Message) error {
			tx := mailtext.Extract(bytes.NewReader(m.Data), mailtext.DefaultLimits)
			base := path.Base(m.Name)
			src := Source{Subject: tx.Subject, Domains: tx.Domains, Images: tx.Images}
			for _, p := range tx.Parts {
				src.Parts = append(src.Parts, p.Text)
			}
			for _, at := range tx.Attachments {
				src.Attachments = append(src.Attachments, Attachment{Data: at.Data})
			}
			ks, _ := set.Sign(Canonicalize(src), nil, nil)
			asIs := slices.ContainsFunc(ks, func(k Key) bool { return k.Family == FamilyAttach && k.Index == remoteIndex })
			recs = append(recs, rec{name: m.Name, sender: senderAddress(m.Data), images: tx.Images, asIs: asIs, class: func() string {
				if labels[base] {
					return strings.TrimSuffix(class, "ham") + "spam"
				}
				return class
			}})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sa := "spamassassin-public-corpus"
	for _, f := range []string{"spamassassin_easy_ham.tar.bz2", "spamassassin_easy_ham_2.tar.bz2", "spamassassin_hard_ham.tar.bz2", "spamassassin_hard_ham_2.tar.bz2"} {
		walk(filepath.Join(sa, f), "spamassassin ham", nil, nil)
	}
	for _, f := range []string{"spamassassin_spam.tar.bz2", "spamassassin_spam_2.tar.bz2"} {
		walk(filepath.Join(sa, f), "spamassassin spam", nil, nil)
	}
	walk(filepath.Join("trec07p-part1", "trec07p-part1.tar.xz"), "trec07p ham",
		func(name string) bool { return strings.HasPrefix(path.Base(name), "inmail.") }, map[string]bool{})
	for _, f := range []string{"cypherpunks_maildir_2007-2008.tar.xz", "cypherpunks_maildir_2009-2013.tar.xz"} {
		walk(filepath.Join("cypherpunks-list-archive", f), "cypherpunks unlabelled", nil, nil)
	}
	for _, r := range recs {
		add(r)
	}
	classes := slices.Sorted(func(yield func(string) bool) {
		for c := range all {
			if !yield(c) {
				return
			}
		}
	})
	for _, c := range classes {
		t.Logf("%s: %d messages, %d with remote images, %d signed by the remote key with their own text", c, all[c], withImages[c], asIs[c])
	}
	for i, v := range variants {
		var shared, crossAddr, crossDomain, crossMsgs, hamSpam, hamSpamMsgs int
		var show []*use
		for _, u := range keys[i] {
			if u.msgs < 2 {
				continue
			}
			shared++
			ham, spam := 0, 0
			for c, n := range u.classes {
				switch {
				case strings.HasSuffix(c, "ham"):
					ham += n
				case strings.HasSuffix(c, "spam"):
					spam += n
				}
			}
			if ham > 0 && spam > 0 {
				hamSpam++
				hamSpamMsgs += u.msgs
			}
			if ham > 0 && len(u.addrs) > 1 {
				crossAddr++
				crossMsgs += u.msgs
				if len(u.senders) > 1 {
					crossDomain++
				}
			}
			if ham > 0 && u.msgs > 1 {
				show = append(show, u)
			}
		}
		t.Logf("key over %s: %d keys, %d shared by 2+ messages; with ham among them: %d shared by 2+ From addresses (%d messages), %d by 2+ sender domains; %d shared by ham and spam (%d messages)",
			v.name, len(keys[i]), shared, crossAddr, crossMsgs, crossDomain, hamSpam, hamSpamMsgs)
		sort.Slice(show, func(a, b int) bool { return show[a].msgs > show[b].msgs })
		for j, u := range show {
			if j == *remoteShow {
				break
			}
			t.Logf("  %d messages, From %v, classes %v: %.200s", u.msgs, u.addrs, u.classes, u.example)
		}
	}
}

// senderAddress returns a message's From address, lower-cased, or "?".
func senderAddress(data []byte) string {
	r := bufio.NewReader(bytes.NewReader(data))
	if b, _ := r.Peek(5); string(b) == "From " {
		r.ReadString('\n')
	}
	m, err := mail.ReadMessage(r)
	if err != nil {
		return "?"
	}
	from := m.Header.Get("From")
	if addr, err := mail.ParseAddress(from); err == nil {
		from = addr.Address
	}
	return strings.ToLower(strings.Trim(from, "<>\" "))
}

// senderDomainOf returns the registrable domain of an address.
func senderDomainOf(addr string) string {
	host := addr[strings.LastIndexByte(addr, '@')+1:]
	if d, err := publicsuffix.EffectiveTLDPlusOne(host); err == nil {
		return d
	}
	return host
}
