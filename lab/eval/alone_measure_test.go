package eval

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"image"
	_ "image/gif" // DecodeConfig of image parts
	_ "image/jpeg"
	_ "image/png"
	"io"
	"maps"
	"mime"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message"
	"golang.org/x/net/html"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/mailtext"
	"github.com/bulkmilter/bulkmilter/signature"
)

// The alone class (docs/evaluation.md, "The alone class (branch r-alone,
// twelfth sitting)"): spam of the real stream that no other message joined.
// TestMeasureAlone counts, offline and over candidate keys the engine does
// not have, how many of the stream's untagged spam each key would bring to
// the site's thresholds and how many ham messages it would tag:
//
//	bulklab eval -q -corpora /work/shared/corpora -seed N -sections stream -stream-trace F
//	go test ./lab/eval -run MeasureAlone -measure -alone-trace F -v
//
// The trace gives each message's class (what its store campaign became) at
// that seed; the keys are counted like the store counts (distinct
// recipients, or distinct sending /24s, within 24 hours of message time,
// the message's own included) and a message is reached when its key's
// recipients reach 10 or its networks 5 (the site's thresholds in
// effect: the ceiling, and policy.adaptive.networks' floor).
var aloneTrace = flag.String("alone-trace", "", "stream trace (bulklab eval -stream-trace) whose received clock gives the classes")

// aloneFeatures are what the candidate keys are made of, for one message.
type aloneFeatures struct {
	mimeTree   string   // content types in walk order, nested
	skel       []string // start tags of the first HTML part
	tagAttrs   []string // distinct tag.attribute names of the first HTML part
	imageDims  []string // declared WxH of each decodable image part
	boundary   string   // the top boundary's shape (digits 9, letters a/A, runs kept)
	msgIDShape string   // the Message-ID's local part's shape
	mailer     string   // X-Mailer (or User-Agent) with its digits folded
	fromDomain string   // the From address's domain
	links      []string // link hosts of the HTML part
}

var (
	reDigits = regexp.MustCompile(`[0-9]+`)
	// aloneClientRe names the mail clients people write with (and
	// ratware imitates) in an X-Mailer.
	aloneClientRe = regexp.MustCompile(`(?i)outlook|thunderbird|mozilla|apple mail|eudora|the bat|kmail|evolution|pine|mutt|opera|pocomail|becky`)
)

// shape folds a token to its character classes, runs collapsed: what a
// sending tool's template keeps while it randomises the characters.
func shape(s string) string {
	var b strings.Builder
	last := rune(0)
	for _, r := range s {
		c := r
		switch {
		case r >= '0' && r <= '9':
			c = '9'
		case r >= 'a' && r <= 'f', r >= 'A' && r <= 'F':
			c = 'x'
		case r >= 'a' && r <= 'z':
			c = 'a'
		case r >= 'A' && r <= 'Z':
			c = 'A'
		}
		if c == last && (c == '9' || c == 'x' || c == 'a' || c == 'A') {
			continue
		}
		b.WriteRune(c)
		last = c
	}
	return b.String()
}

func aloneExtract(raw []byte) aloneFeatures {
	var f aloneFeatures
	e, err := message.Read(bytes.NewReader(raw))
	if e == nil {
		_ = err
		return f
	}
	if _, ps, err := mime.ParseMediaType(e.Header.Get("Content-Type")); err == nil {
		f.boundary = shape(ps["boundary"])
	}
	if id := e.Header.Get("Message-Id"); id != "" {
		local, _, _ := strings.Cut(strings.Trim(strings.TrimSpace(id), "<>"), "@")
		f.msgIDShape = shape(local)
	}
	mailer := e.Header.Get("X-Mailer")
	if mailer == "" {
		mailer = e.Header.Get("User-Agent")
	}
	f.mailer = reDigits.ReplaceAllString(mailer, "9")
	if from := e.Header.Get("From"); from != "" {
		if i := strings.LastIndex(from, "@"); i >= 0 {
			f.fromDomain = strings.ToLower(strings.TrimRight(from[i+1:], "> \t\""))
		}
	}
	var tree strings.Builder
	html1 := false
	var walk func(e *message.Entity, depth int)
	walk = func(e *message.Entity, depth int) {
		if depth > 8 {
			return
		}
		ct, _, _ := e.Header.ContentType()
		if ct == "" {
			ct = "text/plain"
		}
		tree.WriteString(ct)
		if mr := e.MultipartReader(); mr != nil {
			tree.WriteByte('(')
			for {
				p, err := mr.NextPart()
				if p == nil || err != nil {
					break
				}
				walk(p, depth+1)
				tree.WriteByte(',')
			}
			tree.WriteByte(')')
			return
		}
		body, _ := io.ReadAll(io.LimitReader(e.Body, 1<<20))
		switch {
		case ct == "text/html" && !html1:
			html1 = true
			f.skel, f.tagAttrs, f.links = htmlSkeleton(body)
		case strings.HasPrefix(ct, "image/") || bytes.HasPrefix(body, []byte("GIF8")) || bytes.HasPrefix(body, []byte("\xff\xd8\xff")):
			if c, _, err := image.DecodeConfig(bytes.NewReader(body)); err == nil {
				f.imageDims = append(f.imageDims, fmt.Sprintf("%dx%d", c.Width, c.Height))
			}
		}
	}
	walk(e, 0)
	f.mimeTree = tree.String()
	return f
}

// htmlSkeleton returns the start tags of an HTML text, its distinct
// tag.attribute names and its link hosts.
func htmlSkeleton(b []byte) (skel, attrs, links []string) {
	z := html.NewTokenizer(bytes.NewReader(b))
	seen := map[string]bool{}
	for n := 0; n < 5000; n++ {
		tt := z.Next()
		if tt == html.ErrorToken {
			break
		}
		if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
			continue
		}
		name, more := z.TagName()
		tag := string(name)
		skel = append(skel, tag)
		for more {
			var k, v []byte
			k, v, more = z.TagAttr()
			a := tag + "." + string(k)
			if !seen[a] {
				seen[a] = true
				attrs = append(attrs, a)
			}
			if tag == "a" && string(k) == "href" {
				s := strings.ToLower(string(v))
				s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
				if h, _, _ := strings.Cut(s, "/"); h != "" && h != s {
					links = append(links, h)
				}
			}
		}
	}
	sort.Strings(attrs)
	return skel, attrs, links
}

// collapse drops a tag that repeats the one before it.
func collapse(s []string) []string {
	return slices.Compact(slices.Clone(s))
}

// aloneCandidates are the candidate keys measured: each returns the
// message's key, or "" when it has none.
var aloneCandidates = []struct {
	name string
	key  func(f *aloneFeatures) string
}{
	{"HTML skeleton (start tags in order, ≥ 20)", func(f *aloneFeatures) string {
		if len(f.skel) < 20 {
			return ""
		}
		return strings.Join(f.skel, " ")
	}},
	{"HTML skeleton, repeats collapsed (≥ 10)", func(f *aloneFeatures) string {
		c := collapse(f.skel)
		if len(c) < 10 {
			return ""
		}
		return strings.Join(c, " ")
	}},
	{"HTML tag.attribute set + MIME tree (≥ 10)", func(f *aloneFeatures) string {
		if len(f.tagAttrs) < 10 {
			return ""
		}
		return f.mimeTree + "|" + strings.Join(f.tagAttrs, " ")
	}},
	{"MIME tree + images' declared dimensions", func(f *aloneFeatures) string {
		if len(f.imageDims) == 0 {
			return ""
		}
		return f.mimeTree + "|" + strings.Join(f.imageDims, " ")
	}},
	{"tool: MIME tree + boundary + Message-ID shapes + X-Mailer", func(f *aloneFeatures) string {
		if f.boundary == "" {
			return ""
		}
		return f.mimeTree + "|" + f.boundary + "|" + f.msgIDShape + "|" + f.mailer
	}},
	{"tool + images' dimensions", func(f *aloneFeatures) string {
		if f.boundary == "" || len(f.imageDims) == 0 {
			return ""
		}
		return f.mimeTree + "|" + f.boundary + "|" + f.msgIDShape + "|" + f.mailer + "|" + strings.Join(f.imageDims, " ")
	}},
	{"tool + HTML skeleton collapsed (≥ 10)", func(f *aloneFeatures) string {
		c := collapse(f.skel)
		if f.boundary == "" || len(c) < 10 {
			return ""
		}
		return f.mimeTree + "|" + f.boundary + "|" + f.msgIDShape + "|" + f.mailer + "|" + strings.Join(c, " ")
	}},
	{"From domain", func(f *aloneFeatures) string { return f.fromDomain }},
	{"From domain + MIME tree", func(f *aloneFeatures) string {
		if f.fromDomain == "" {
			return ""
		}
		return f.fromDomain + "|" + f.mimeTree
	}},
	{"link hosts (set) + HTML skeleton collapsed", func(f *aloneFeatures) string {
		c := collapse(f.skel)
		if len(f.links) == 0 || len(c) < 10 {
			return ""
		}
		l := slices.Clone(f.links)
		slices.Sort(l)
		return strings.Join(slices.Compact(l), " ") + "|" + strings.Join(c, " ")
	}},
}

// readTraceClasses reads a stream trace's received clock: each message's
// class (tagged, early, small, stuck, alone, unsigned for spam; list or
// personal for ham), as streamClasses sorts them.
func readTraceClasses(t *testing.T, path string) map[string]string {
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	type row struct{ name, kind, bulk, camp string }
	var rows []row
	type camp struct{ n, size int }
	camps := map[string]*camp{}
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if len(c) < 9 || c[0] != ClockReceived {
			continue
		}
		rows = append(rows, row{c[1], c[2], c[3], c[5]})
		if c[5] == "-" {
			continue
		}
		var r, nw int
		fmt.Sscan(c[6], &r)
		fmt.Sscan(c[7], &nw)
		k := camps[c[5]]
		if k == nil {
			k = &camp{}
			camps[c[5]] = k
		}
		k.n++
		k.size = max(k.size, r, nw)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range rows {
		cls := r.kind
		if r.kind == "spam" {
			switch k := camps[r.camp]; {
			case r.bulk == "1":
				cls = "tagged"
			case r.camp == "-":
				cls = "unsigned"
			case k.size >= 10:
				cls = "early"
			case k.size >= 2:
				cls = "small"
			case k.n > 1:
				cls = "stuck"
			default:
				cls = "alone"
			}
		}
		out[r.name] = cls
	}
	return out
}

func TestMeasureAlone(t *testing.T) {
	if !*measure || *aloneTrace == "" {
		t.Skip("measurement; run with -measure -alone-trace F")
	}
	classes := readTraceClasses(t, *aloneTrace)
	msgs, err := loadStream(sharedCorpora(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	relays := []netip.Prefix{netip.MustParsePrefix(StreamRelays[0])}
	type tally map[string]int // class → reached
	counts := make([]struct {
		rcpts, nets dimension[string] // each candidate key's distinct recipients and networks
		reached     tally
		strict      tally // networks at 10 too
		personal    []string
		hamNets     [2]int64 // most networks a list, personal message's key reached
		hamRcpts    [2]int64
		spamKeys    map[string]int // spam messages with the key
		keyed       tally          // messages with a key, by class
		clientLike  int            // alone spam reached whose X-Mailer names a mail client
		samples     map[string][]string
	}, len(aloneCandidates))
	for i := range counts {
		counts[i].rcpts, counts[i].nets = dimension[string]{}, dimension[string]{}
		counts[i].reached, counts[i].strict = tally{}, tally{}
		counts[i].spamKeys = map[string]int{}
		counts[i].keyed, counts[i].samples = tally{}, map[string][]string{}
	}
	type aloneMsg struct {
		shape string
		keys  []string // per candidate
	}
	var alone []aloneMsg
	union := tally{} // reached by the collapsed skeleton or the tag.attribute set
	total := tally{}
	var last time.Time
	for _, m := range msgs {
		cls := classes[m.name]
		total[cls]++
		b := detect.NewBuilder(detect.Limits{}, "X-Bulk", "")
		b.ReadRaw(m.raw)
		msg := b.Message()
		msg.SetFromHeader(detect.FromHeader{Recipients: true, Client: true})
		at := detect.ReceivedTime(msg.Header)
		if at.IsZero() {
			at = last
		}
		last = at
		network := detect.Network(detect.RelayedClient(msg.Header, msg.Client, relays))
		f := aloneExtract(m.raw)
		var am aloneMsg
		either := false
		if cls == "alone" {
			am.shape = aloneShape(m.raw, &f)
		}
		for i, c := range aloneCandidates {
			k := c.key(&f)
			if cls == "alone" {
				am.keys = append(am.keys, k)
			}
			if k == "" {
				continue
			}
			cn := &counts[i]
			if m.spam {
				cn.spamKeys[k]++
				if len(cn.samples[k]) < 4 {
					cn.samples[k] = append(cn.samples[k], m.name+" "+msg.Header.Get("Subject"))
				}
			}
			cn.keyed[cls]++
			if cls == "personal" && aloneClientRe.MatchString(f.mailer) {
				cn.keyed["personal, a mail client's"]++
			}
			var r int64
			for _, a := range msg.Recipients {
				r = cn.rcpts.add([]string{k}, detect.NormaliseAddress(a), at)
			}
			if len(msg.Recipients) == 0 {
				r = cn.rcpts.add([]string{k}, "", at)
			}
			nw := cn.nets.add([]string{k}, network, at)
			if r >= 10 || nw >= 5 {
				either = either || i == 1 || i == 2
				cn.reached[cls]++
				if cls == "alone" && aloneClientRe.MatchString(f.mailer) {
					cn.clientLike++
				}
				if cls == "personal" {
					cn.personal = append(cn.personal, m.name)
				}
			}
			if r >= 10 || nw >= 10 {
				cn.strict[cls]++
			}
			if !m.spam {
				j := 0
				if cls == "personal" {
					j = 1
				}
				cn.hamNets[j], cn.hamRcpts[j] = max(cn.hamNets[j], nw), max(cn.hamRcpts[j], r)
			}
		}
		if cls == "alone" {
			alone = append(alone, am)
		}
		if either {
			union[cls]++
		}
	}
	// The alone spam by what it is made of, and whether another spam
	// message of the stream has its tag.attribute set or its collapsed
	// skeleton (a template the copies share while their text differs).
	byShape := map[string][2]int{}
	for _, a := range alone {
		shared := false
		for _, i := range []int{1, 2} {
			if k := a.keys[i]; k != "" && counts[i].spamKeys[k] > 1 {
				shared = true
			}
		}
		c := byShape[a.shape]
		c[0]++
		if shared {
			c[1]++
		}
		byShape[a.shape] = c
	}
	for _, s := range slices.Sorted(maps.Keys(byShape)) {
		t.Logf("| alone: %s | %d | template shared with other spam: %d |", s, byShape[s][0], byShape[s][1])
	}
	t.Logf("messages by class: %v", total)
	t.Logf("| collapsed skeleton or tag.attribute set | rcpts 10 or nets 5 | alone %d | 2–9 %d | stuck %d | early %d | (tagged %d) | list ham %d | personal ham %d |",
		union["alone"], union["small"], union["stuck"], union["early"], union["tagged"], union["list"], union["personal"])
	for i, c := range aloneCandidates {
		cn := &counts[i]
		for _, v := range []struct {
			at string
			t  tally
		}{{"rcpts 10 or nets 5", cn.reached}, {"rcpts 10 or nets 10", cn.strict}} {
			t.Logf("| %s | %s | alone %d | 2–9 %d | stuck %d | early %d | (tagged %d) | list ham %d | personal ham %d |",
				c.name, v.at, v.t["alone"], v.t["small"], v.t["stuck"], v.t["early"], v.t["tagged"], v.t["list"], v.t["personal"])
		}
		t.Logf("   keyed: alone %d, list ham %d, personal ham %d (written in a mail client %d); alone reached whose X-Mailer names a mail client %d",
			cn.keyed["alone"], cn.keyed["list"], cn.keyed["personal"], cn.keyed["personal, a mail client's"], cn.clientLike)
		if i == 1 || i == 2 {
			top := slices.SortedFunc(maps.Keys(cn.spamKeys), func(a, b string) int { return cn.spamKeys[b] - cn.spamKeys[a] })
			for _, k := range top[:min(8, len(top))] {
				t.Logf("   a key of %d spam messages: %q; the key: %.300s", cn.spamKeys[k], cn.samples[k], k)
			}
		}
		t.Logf("   most networks / recipients a ham key reached: list %d / %d, personal %d / %d", cn.hamNets[0], cn.hamRcpts[0], cn.hamNets[1], cn.hamRcpts[1])
		if len(cn.personal) > 0 {
			t.Logf("   personal: %v", cn.personal[:min(len(cn.personal), 10)])
		}
	}
}

// aloneShape sorts a message by what it is made of: an image part with a
// text of more or fewer than 100 canonical words (the attachment family's
// short_text), remote images, HTML or plain text.
func aloneShape(raw []byte, f *aloneFeatures) string {
	text := mailtext.Extract(bytes.NewReader(raw), mailtext.Limits{})
	var src signature.Source
	for _, p := range text.Parts {
		src.Parts = append(src.Parts, p.Text)
	}
	words := len(signature.Canonicalize(src).Tokens)
	switch {
	case len(f.imageDims) > 0 && words > 100:
		return "an image, a text of more than 100 words"
	case len(f.imageDims) > 0:
		return "an image, a text of 100 words or fewer"
	case len(text.Images) > 0:
		return "remote images"
	case len(f.skel) > 0:
		return "HTML text"
	}
	return "plain text"
}

// TestMeasureAloneHam counts, for each candidate key, the ham of the
// SpamAssassin and CSDMC corpora (HamStream, no client addresses) whose key
// other ham with 5 or more distinct From domains shares, all in one window:
// the worst case of senders each from a network of its own.
func TestMeasureAloneHam(t *testing.T) {
	if !*measure {
		t.Skip("measurement; run with -measure")
	}
	items, err := HamStream(sharedCorpora(t))
	if err != nil {
		t.Fatal(err)
	}
	type group struct {
		domains map[string]bool
		list    int
		n       int
		client  int // written in a mail client (X-Mailer names one)
	}

	groups := make([]map[string]*group, len(aloneCandidates))
	for i := range groups {
		groups[i] = map[string]*group{}
	}
	for _, it := range items {
		f := aloneExtract(it.Raw)
		list := isListMail(it.Raw)
		for i, c := range aloneCandidates {
			k := c.key(&f)
			if k == "" {
				continue
			}
			g := groups[i][k]
			if g == nil {
				g = &group{domains: map[string]bool{}}
				groups[i][k] = g
			}
			g.domains[f.fromDomain] = true
			g.n++
			if list {
				g.list++
			}
			if !list && aloneClientRe.MatchString(f.mailer) {
				g.client++
			}
		}
	}
	t.Logf("ham messages: %d", len(items))
	for i, c := range aloneCandidates {
		keyed, five, fiveList, ten, two, three := 0, 0, 0, 0, 0, 0
		client, clientShared := 0, 0
		for _, g := range groups[i] {
			keyed += g.n
			client += g.client
			if g.n > 1 {
				clientShared += g.client
			}
			if len(g.domains) >= 2 {
				two += g.n
			}
			if len(g.domains) >= 3 {
				three += g.n
			}
			if len(g.domains) >= 5 {
				five += g.n
				fiveList += g.list
			}
			if len(g.domains) >= 10 {
				ten += g.n
			}
		}
		t.Logf("| %s | ham keyed %d | in a group of ≥ 2 From domains %d, ≥ 3 %d, ≥ 5 %d (list %d, personal %d), ≥ 10 %d |", c.name, keyed, two, three, five, fiveList, five-fiveList, ten)
		t.Logf("   personal ham written in a mail client (X-Mailer): %d keyed, %d sharing its key with another ham message", client, clientShared)
	}
}
