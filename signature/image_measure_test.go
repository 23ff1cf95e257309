package signature

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/bulkmilter/bulkmilter/lab/corpus"
	"github.com/bulkmilter/bulkmilter/mailbox"
	"github.com/bulkmilter/bulkmilter/mailtext"
)

type streamImage struct {
	msg   int // message number in the stream
	spam  bool
	sha   [32]byte
	grid  map[string][]uint32
	w, h  int
	words int // canonical words of the message's text
}

// streamImages decodes every image part of the real stream (trec07p-part1).
func streamImages(t *testing.T) []streamImage {
	p := corpusFile(t, filepath.Join("trec07p-part1", "trec07p-part1.tar.xz"))
	labels := map[string]bool{}
	var out []streamImage
	opts := mailbox.Options{
		MaxSize: -1,
		Filter:  func(name string) bool { return strings.HasPrefix(path.Base(name), "inmail.") },
		OnSkip:  func(string, error) error { return nil },
		Hooks: mailbox.Hooks{
			Sidecar:     "index",
			ReadSidecar: func(name string, r io.Reader) error { return corpus.TRECIndex(name, r, labels) },
		},
	}
	err := opts.Walk(p, func(m *mailbox.Message) error {
		var n int
		if _, err := fmt.Sscanf(path.Base(m.Name), "inmail.%d", &n); err != nil {
			return nil
		}
		tx := mailtext.Extract(bytes.NewReader(m.Data), mailtext.DefaultLimits)
		src := Source{Subject: tx.Subject}
		for _, p := range tx.Parts {
			src.Parts = append(src.Parts, p.Text)
		}
		words := len(Canonicalize(src).Tokens)
		for _, a := range tx.Attachments {
			img, err := decodeImage(a.Data, pixels(1<<22), 0)
			if err != nil {
				continue
			}
			si := streamImage{msg: n, sha: sha256.Sum256(a.Data), grid: map[string][]uint32{}, w: img.Bounds().Dx(), h: img.Bounds().Dy(), words: words}
			si.grid["9x8"] = greyGrid(img, 9, 8)
			si.grid["8x9"] = greyGrid(img, 8, 9)
			si.grid["8x8"] = greyGrid(img, 8, 8)
			si.grid["16x16"] = greyGrid(img, 16, 16)
			out = append(out, si)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range out {
		out[i].spam = labels[fmt.Sprintf("inmail.%d", out[i].msg)]
	}
	return out
}

var shapeTable = flag.String("shape-table", "", "write each image's message, label, words, size and shape to this file")

var dumpImages = flag.String("dump-images", "", "log some images sharing only a shape hash")

func dhash(g []uint32, gw int) uint64 {
	var h uint64
	for i := 0; i+1 < len(g); i++ {
		if (i+1)%gw == 0 {
			continue
		}
		h = h<<1 | b2u(g[i] < g[i+1])
	}
	return h
}

func ahash(g []uint32) uint64 {
	var s uint64
	for _, v := range g {
		s += uint64(v)
	}
	m := s / uint64(len(g))
	var h uint64
	for _, v := range g {
		h = h<<1 | b2u(uint64(v) > m)
	}
	return h
}

func TestMeasureImageShape(t *testing.T) {
	if !*measure {
		t.Skip("measurement; run with -measure")
	}
	imgs := streamImages(t)
	spamImgs, hamImgs := 0, 0
	shaMsgs := map[[32]byte]map[int]bool{}
	for _, im := range imgs {
		if im.spam {
			spamImgs++
		} else {
			hamImgs++
		}
		if shaMsgs[im.sha] == nil {
			shaMsgs[im.sha] = map[int]bool{}
		}
		shaMsgs[im.sha][im.msg] = true
	}
	t.Logf("decoded images: %d spam, %d ham", spamImgs, hamImgs)
	if *shapeTable != "" {
		var b bytes.Buffer
		for _, im := range imgs {
			h, ok := imageShapeGrid(im.grid["8x8"])
			fmt.Fprintf(&b, "inmail.%d\t%v\t%d\t%dx%d\t%016x\t%v\t%x\n", im.msg, im.spam, im.words, im.w, im.h, h, ok, im.sha[:8])
		}
		if err := os.WriteFile(*shapeTable, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	variants := []struct {
		name string
		f    func(im streamImage) uint64
	}{
		{"dhash 9x8", func(im streamImage) uint64 { return dhash(im.grid["9x8"], 9) }},
		{"dhash 9x8 + 8x9", func(im streamImage) uint64 {
			return dhash(im.grid["9x8"], 9) ^ bits.RotateLeft64(dhash(transpose(im.grid["8x9"], 8, 9), 9), 17)
		}},
		{"ahash 8x8", func(im streamImage) uint64 { return ahash(im.grid["8x8"]) }},
		{"ahash 8x8 low 4 rows", func(im streamImage) uint64 { return ahash(im.grid["8x8"]) & 0xffffffff }},
		{"ahash 8x8 high 4 rows", func(im streamImage) uint64 { return ahash(im.grid["8x8"]) >> 32 }},
		{"ahash 16x16 folded", func(im streamImage) uint64 {
			g := im.grid["16x16"]
			return ahash(g[:64]) ^ bits.RotateLeft64(ahash(g[64:128]), 1) ^ bits.RotateLeft64(ahash(g[128:192]), 2) ^ bits.RotateLeft64(ahash(g[192:]), 3)
		}},
	}
	for _, v := range variants {
		byHash := map[uint64]map[int]bool{}
		hs := make([]uint64, len(imgs))
		for i, im := range imgs {
			h := v.f(im)
			hs[i] = h
			if byHash[h] == nil {
				byHash[h] = map[int]bool{}
			}
			byHash[h][im.msg] = true
		}
		// spam messages whose image shares a hash with another message
		// but not its exact bytes; ham images sharing a hash with another
		// message.
		spamShared, spamExact, hamShared := map[int]bool{}, map[int]bool{}, map[int]bool{}
		for i, im := range imgs {
			shared := len(byHash[hs[i]]) > 1
			exact := len(shaMsgs[im.sha]) > 1
			switch {
			case im.spam && exact:
				spamExact[im.msg] = true
			case im.spam && shared:
				spamShared[im.msg] = true
			case !im.spam && shared && !exact:
				hamShared[im.msg] = true
			}
		}
		var hamNames []string
		for m := range hamShared {
			hamNames = append(hamNames, fmt.Sprint(m))
		}
		sort.Strings(hamNames)
		groups := 0
		for _, ms := range byHash {
			if len(ms) > 1 {
				groups++
			}
		}
		// near: spam images whose nearest other-message hash is within d
		near := map[int]int{}
		for i, im := range imgs {
			if !im.spam {
				continue
			}
			best := 65
			for j := range imgs {
				if imgs[j].msg != im.msg {
					best = min(best, bits.OnesCount64(hs[i]^hs[j]))
				}
			}
			near[best]++
		}
		if v.name == "ahash 8x8" && *dumpImages != "" {
			dumped := 0
			for i, im := range imgs {
				if !im.spam || len(shaMsgs[im.sha]) > 1 || len(byHash[hs[i]]) < 2 || dumped >= 6 {
					continue
				}
				dumped++
				t.Logf("dump: message %d %dx%d hash %016x shared by %v", im.msg, im.w, im.h, hs[i], byHash[hs[i]])
			}
		}
		t.Logf("%s: spam messages sharing an exact image %d, sharing only the hash %d; ham messages sharing the hash %d %.300v; groups %d; nearest distance histogram %v",
			v.name, len(spamExact), len(spamShared), len(hamShared), hamNames, groups, near)
	}
}

func transpose(g []uint32, w, h int) []uint32 {
	out := make([]uint32, len(g))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			out[x*h+y] = g[y*w+x]
		}
	}
	return out
}

var imageTable = flag.String("image-table", "", "TestMeasureImageTable: write every decodable image of -image-corpora to this file")

var imageCorpora = flag.String("image-corpora", "", "TestMeasureImageTable: comma-separated label=archive (label ham or spam), relative to the corpora")

// TestMeasureImageTable writes, for every decodable image part of the
// archives named by -image-corpora, one tab-separated line: archive,
// message, label, canonical words, size, 8×8 average hash (with whether
// it is kept) and the first bytes of its SHA-256. The near-duplicate
// measurements of docs/evaluation.md ("Near shapes") are counted over it.
func TestMeasureImageTable(t *testing.T) {
	if !*measure || *imageTable == "" {
		t.Skip("measurement; run with -measure -image-table F -image-corpora L")
	}
	var b bytes.Buffer
	for _, lc := range strings.Split(*imageCorpora, ",") {
		label, rel, _ := strings.Cut(lc, "=")
		opts := mailbox.Options{MaxSize: -1, OnSkip: func(string, error) error { return nil }}
		err := opts.Walk(corpusFile(t, rel), func(m *mailbox.Message) error {
			tx := mailtext.Extract(bytes.NewReader(m.Data), mailtext.DefaultLimits)
			src := Source{Subject: tx.Subject}
			for _, p := range tx.Parts {
				src.Parts = append(src.Parts, p.Text)
			}
			words := -1
			for _, a := range tx.Attachments {
				img, err := decodeImage(a.Data, pixels(1<<22), 0)
				if err != nil {
					continue
				}
				if words < 0 {
					words = len(Canonicalize(src).Tokens)
				}
				h, ok := imageShapeGrid(greyGrid(img, 8, 8))
				sum := sha256.Sum256(a.Data)
				fmt.Fprintf(&b, "%s\t%s\t%s\t%d\t%dx%d\t%016x\t%v\t%x\n", path.Base(rel), m.Name, label, words, img.Bounds().Dx(), img.Bounds().Dy(), h, ok, sum[:8])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(*imageTable, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

var streamFeatures = flag.String("stream-features", "", "TestMeasureStreamFeatures: write each real-stream message's text and parts to this file")

// TestMeasureStreamFeatures writes, per message of the real stream, what
// decides whether a family can sign it: canonical words, visible text
// bytes, each non-text part's media type, size and whether it decodes
// as an image, and the extractor's defects (docs/evaluation.md, "The
// stream's unsigned spam").
func TestMeasureStreamFeatures(t *testing.T) {
	if !*measure || *streamFeatures == "" {
		t.Skip("measurement; run with -measure -stream-features F")
	}
	var b bytes.Buffer
	opts := mailbox.Options{
		MaxSize: -1,
		Filter:  func(name string) bool { return strings.HasPrefix(path.Base(name), "inmail.") },
		OnSkip:  func(string, error) error { return nil },
	}
	err := opts.Walk(corpusFile(t, filepath.Join("trec07p-part1", "trec07p-part1.tar.xz")), func(m *mailbox.Message) error {
		tx := mailtext.Extract(bytes.NewReader(m.Data), mailtext.DefaultLimits)
		src := Source{Subject: tx.Subject}
		var cts []string
		for _, p := range tx.Parts {
			src.Parts = append(src.Parts, p.Text)
			cts = append(cts, p.ContentType)
		}
		var ats []string
		for _, a := range tx.Attachments {
			_, err := decodeImage(a.Data, pixels(1<<22), 0)
			ats = append(ats, fmt.Sprintf("%s:%d:%v", a.ContentType, len(a.Data), err == nil))
		}
		var defs []string
		for _, d := range tx.Defects {
			defs = append(defs, string(d.Kind))
		}
		fmt.Fprintf(&b, "%s\t%d\t%d\t%s\t%s\t%s\t%d\n", path.Base(m.Name), len(Canonicalize(src).Tokens), tx.Stats.TextBytes,
			strings.Join(cts, ","), strings.Join(ats, ","), strings.Join(defs, ","), tx.Stats.AttachSkipped)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(*streamFeatures, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
