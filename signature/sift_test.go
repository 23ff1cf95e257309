package signature

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// intelligentAttack edits the document so that every window of 10
// consecutive tokens contains an edit (Malkin & Venkatesan §3.4: "attacking
// the tokens in positions 9, 19, 29, …"): 8 original tokens, an edit, then
// 9 originals between edits. kind: 0 adds a token, 1 deletes one, 2
// changes one, 3 alternates the three.
func intelligentAttack(toks []string, kind int, rng *rand.Rand, vocab []string) []string {
	out := make([]string, 0, len(toks)+len(toks)/9+1)
	run, target, op := 0, 8, 0
	for i := 0; i < len(toks); {
		if run < target {
			out = append(out, toks[i])
			i++
			run++
			continue
		}
		k := kind
		if kind == 3 {
			k = op % 3
			op++
		}
		switch k {
		case 0:
			out = append(out, vocab[rng.IntN(len(vocab))])
		case 1:
			i++
		case 2:
			out = append(out, vocab[rng.IntN(len(vocab))])
			i++
		}
		run, target = 0, 9
	}
	return out
}

// randomAttack makes 0.1n random edits of one kind (0 add, 1 delete, 2
// change) or 0.035n of each (3).
func randomAttack(toks []string, kind int, rng *rand.Rand, vocab []string) []string {
	out := slices.Clone(toks)
	n := len(toks)
	do := func(k, count int) {
		for range count {
			switch k {
			case 0:
				out = slices.Insert(out, rng.IntN(len(out)+1), vocab[rng.IntN(len(vocab))])
			case 1:
				if len(out) > 0 {
					i := rng.IntN(len(out))
					out = slices.Delete(out, i, i+1)
				}
			case 2:
				out[rng.IntN(len(out))] = vocab[rng.IntN(len(vocab))]
			}
		}
	}
	if kind == 3 {
		c := int(0.035*float64(n) + 0.5)
		do(0, c)
		do(1, c)
		do(2, c)
	} else {
		do(kind, int(0.1*float64(n)+0.5))
	}
	return out
}

type siftSystem struct {
	name string
	f    SiftFormation
	b    int
}

var siftSystems = []siftSystem{
	{"Slid. Win.", SiftWindow, 1},
	{"Rand. Skip.", SiftSkip, 1},
	{"Slid. Win. & Rand. Part.", SiftWindow, 2},
	{"Rand. Skip. & Rand. Part.", SiftSkip, 2},
}

var siftAttacks = []struct {
	name   string
	random bool
	kind   int
}{
	{"Intelligent adding", false, 0}, {"Intelligent deleting", false, 1},
	{"Intelligent changing", false, 2}, {"Intelligent combination", false, 3},
	{"Random adding", true, 0}, {"Random deleting", true, 1},
	{"Random changing", true, 2}, {"Random combination", true, 3},
}

// paperTable2 holds Malkin & Venkatesan's Table 2 (pure hashing, then
// min-hashing): per attack, S1 and S3 for the four systems in siftSystems
// order.
var paperTable2 = [2][8][4][2]float64{
	{
		{{0, 0}, {0.184, 0.339}, {0.152, 0.287}, {0.182, 0.332}},
		{{0.00114, 0.00264}, {0.187, 0.354}, {0.157, 0.296}, {0.190, 0.346}},
		{{0.000676, 0.00148}, {0.0557, 0.115}, {0.0482, 0.0969}, {0.064, 0.129}},
		{{0, 0}, {0.115, 0.228}, {0.0914, 0.180}, {0.109, 0.211}},
		{{0.242, 0.422}, {0.248, 0.431}, {0.245, 0.427}, {0.238, 0.415}},
		{{0.205, 0.379}, {0.216, 0.389}, {0.205, 0.375}, {0.218, 0.387}},
		{{0.194, 0.347}, {0.109, 0.213}, {0.127, 0.243}, {0.106, 0.203}},
		{{0.205, 0.370}, {0.151, 0.287}, {0.174, 0.317}, {0.155, 0.285}},
	},
	{
		{{0, 0}, {0.168, 0.290}, {0.139, 0.243}, {0.176, 0.298}},
		{{0.000513, 0.00102}, {0.176, 0.302}, {0.148, 0.258}, {0.171, 0.292}},
		{{0.000251, 0.000500}, {0.0557, 0.105}, {0.0403, 0.0768}, {0.0550, 0.104}},
		{{0.000456, 0.000901}, {0.106, 0.191}, {0.0907, 0.165}, {0.106, 0.190}},
		{{0.222, 0.362}, {0.226, 0.370}, {0.232, 0.375}, {0.223, 0.364}},
		{{0.200, 0.3322}, {0.213, 0.355}, {0.205, 0.342}, {0.206, 0.339}},
		{{0.213, 0.349}, {0.104, 0.188}, {0.132, 0.230}, {0.110, 0.196}},
		{{0.178, 0.300}, {0.147, 0.254}, {0.155, 0.266}, {0.141, 0.245}},
	},
}

// siftTable2 reproduces the paper's experiment: 100 Reuters articles of
// 1–6 kB, each attacked eight ways, mean S1 and S3 between the original
// and attacked fingerprints for four systems and both sifting methods.
func siftTable2(t *testing.T) (got [2][8][4][2]float64) {
	t.Helper()
	var docs [][]string
	vocabSet := map[string]bool{}
	for _, body := range reuters(t, 3000) {
		if len(body) < 1000 || len(body) > 6000 {
			continue
		}
		toks := tokenize(body)
		for _, w := range toks {
			vocabSet[w] = true
		}
		if len(docs) < 100 && len(vocabSet) > 0 && len(vocabSet)%3 == 0 {
			docs = append(docs, toks)
		}
	}
	if len(docs) < 100 {
		t.Fatalf("only %d articles of 1–6 kB", len(docs))
	}
	vocab := sortedKeys(vocabSet)
	for si, sys := range siftSystems {
		p := DefaultSiftParams()
		p.Formation, p.Partitions = sys.f, sys.b
		s, err := NewSift(testSecret(t), p)
		if err != nil {
			t.Fatal(err)
		}
		for ai, a := range siftAttacks {
			rng := rand.New(rand.NewPCG(uint64(si), uint64(ai)))
			for _, toks := range docs {
				var att []string
				if a.random {
					att = randomAttack(toks, a.kind, rng, vocab)
				} else {
					att = intelligentAttack(toks, a.kind, rng, vocab)
				}
				for m, how := range []Sifting{PureHashing, MinHashing} {
					fo, fa := s.Fingerprint(docOf(toks), how), s.Fingerprint(docOf(att), how)
					got[m][ai][si][0] += S1(fo, fa) / float64(len(docs))
					got[m][ai][si][1] += S3(fo, fa) / float64(len(docs))
				}
			}
		}
	}
	return got
}

// TestSiftTable2 checks the shape of Malkin & Venkatesan's Table 2: an
// edit every 10th token drives a sliding window of length 10 to about
// zero, while random skipping keeps S3 clearly above zero; random attacks
// hurt all systems moderately, and changes hurt random skipping about
// twice as much as additions.
func TestSiftTable2(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	got := siftTable2(t)
	for m, method := range []string{"Pure Hashing", "Min-Hashing"} {
		t.Logf("%s: S1/S3 measured (paper)", method)
		for ai, a := range siftAttacks {
			row := fmt.Sprintf("%-24s", a.name)
			for si := range siftSystems {
				row += fmt.Sprintf(" | %.3f/%.3f (%.3f/%.3f)", got[m][ai][si][0], got[m][ai][si][1], paperTable2[m][ai][si][0], paperTable2[m][ai][si][1])
			}
			t.Log(row)
		}
	}
	const sw, rs, swp, rsp = 0, 1, 2, 3
	for m := range 2 {
		for ai, a := range siftAttacks {
			s3 := func(si int) float64 { return got[m][ai][si][1] }
			if !a.random {
				if s3(sw) > 0.02 {
					t.Errorf("%s, method %d: sliding window S3 = %.3f, want about 0", a.name, m, s3(sw))
				}
				floor := 0.15
				if a.kind == 2 {
					floor = 0.05 // changes cost random skipping twice (§3.2)
				}
				for _, si := range []int{rs, swp, rsp} {
					if s3(si) < floor {
						t.Errorf("%s, method %d: %s S3 = %.3f, want >= %.2f", a.name, m, siftSystems[si].name, s3(si), floor)
					}
				}
			} else {
				for si := range siftSystems {
					if s3(si) < 0.12 || s3(si) > 0.7 {
						t.Errorf("%s, method %d: %s S3 = %.3f, want within [0.12, 0.7] (paper 0.19–0.43)", a.name, m, siftSystems[si].name, s3(si))
					}
				}
			}
		}
		// Every cell within ±0.1 of the paper's.
		for ai := range siftAttacks {
			for si := range siftSystems {
				for k := range 2 {
					if d := got[m][ai][si][k] - paperTable2[m][ai][si][k]; d > 0.1 || d < -0.1 {
						t.Errorf("%s, method %d, %s, S%d: %.3f vs paper %.3f", siftAttacks[ai].name, m, siftSystems[si].name, 1+2*k, got[m][ai][si][k], paperTable2[m][ai][si][k])
					}
				}
			}
		}
		// Changing hurts random skipping more than adding (§3.2).
		if got[m][2][rs][1] >= got[m][0][rs][1] || got[m][6][rs][1] >= got[m][4][rs][1] {
			t.Errorf("method %d: random skipping is not hurt more by changes than by additions", m)
		}
	}
}

// skipReference is the plain one-cluster-at-a-time random skipping.
func skipReference(t *Sift, toks []uint64) []uint64 {
	var out []uint64
	l := uint64(t.p.ClusterLen)
	maxScan := int(math.Ceil(8 * float64(l) / t.p.Accept))
	for j := range toks {
		c, k := toks[j], uint64(1)
		for i := j + 1; i < len(toks) && i < j+1+maxScan && k < l; i++ {
			y := (c ^ toks[i]) * t.mulA
			if y < t.thresh {
				c, k = y, k+1
			}
		}
		if k == l {
			out = append(out, t.fin.mix(c))
		}
	}
	return out
}

// checkSkip fails t unless skip forms the reference's clusters of toks.
// Lanes append clusters as they complete; the sample and the fingerprints
// do not depend on the order, so the two are compared sorted.
func checkSkip(t testing.TB, s *Sift, toks []uint64) {
	t.Helper()
	sc := &siftScratch{pass: toks}
	s.skip(sc)
	got, want := slices.Sorted(slices.Values(sc.clusters)), skipReference(s, toks)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("l=%d accept=%g n=%d: %d clusters, reference %d (or different ones)", s.p.ClusterLen, s.p.Accept, len(toks), len(got), len(want))
	}
}

func newSkipSift(t testing.TB, l int, accept float64) *Sift {
	t.Helper()
	p := DefaultSiftParams()
	p.ClusterLen, p.Accept = l, accept
	s, err := NewSift(testSecret(t), p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The lanes form the reference's clusters on every length, including
// clusters cut short by the end of the text or by maxScan, and clusters
// of one token (nothing to scan).
func TestSiftSkipMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for _, l := range []int{1, 2, 10, 64} {
		for _, accept := range []float64{0.3, 0.05, 1} {
			s := newSkipSift(t, l, accept)
			for n := range 400 {
				toks := make([]uint64, n)
				for i := range toks {
					toks[i] = rng.Uint64()
				}
				checkSkip(t, s, toks)
			}
		}
	}
}

// FuzzSiftSkip: the lanes form the reference's clusters for any tokens,
// cluster length and acceptance, repeated tokens included.
func FuzzSiftSkip(f *testing.F) {
	f.Add([]byte("0123456789abcdefghijklmnopqrstuvwxyz"), uint8(10), uint8(30))
	f.Add(make([]byte, 800), uint8(1), uint8(100))
	f.Add([]byte{1, 2, 3}, uint8(64), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, l, accept uint8) {
		// A byte a token keeps the inputs short; the odd multiplier spreads them.
		toks := make([]uint64, len(data))
		for i, b := range data {
			toks[i] = (uint64(b) + 1) * 0x9e3779b97f4a7c15
		}
		checkSkip(t, newSkipSift(t, 1+int(l)%64, float64(1+int(accept)%100)/100), toks)
	})
}

// BenchmarkSiftSkip is the random-skipping formation alone, on one pass of
// 300 random tokens (a message's pass is a few hundred).
func BenchmarkSiftSkip(b *testing.B) {
	s := newSkipSift(b, 10, 0.3)
	rng := rand.New(rand.NewPCG(1, 2))
	toks := make([]uint64, 300)
	for i := range toks {
		toks[i] = rng.Uint64()
	}
	sc := &siftScratch{}
	for b.Loop() {
		sc.pass, sc.clusters = toks, sc.clusters[:0]
		s.skip(sc)
	}
}

// The passes of every partition count hold the tokens outside their
// partition (all of them when b is 1), in order: the special case of two
// against the general loop.
func TestSiftPassesMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for b := 1; b <= 8; b++ {
		p := DefaultSiftParams()
		p.Partitions = b
		s, err := NewSift(testSecret(t), p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{0, 1, 2, 7, 300} {
			th := make([]uint64, n)
			for i := range th {
				th[i] = rng.Uint64()
			}
			want := make([][]uint64, b)
			for _, h := range th {
				for q := range want {
					if b == 1 || q != fastrange(s.part.mix(h), b) {
						want[q] = append(want[q], s.tok.mix(h))
					}
				}
			}
			sc := &siftScratch{}
			s.clusters(th, sc)
			for q := range want {
				if !slices.Equal(sc.passes[q], want[q]) {
					t.Fatalf("b=%d n=%d: pass %d has %d tokens, want %d (or other ones)", b, n, q, len(sc.passes[q]), len(want[q]))
				}
			}
		}
	}
}
