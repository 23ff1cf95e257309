package eval

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bulkmilter/bulkmilter/signature"
)

// MalkinResult is Malkin & Venkatesan §3.4's experiment on real mail: the
// eight attacks applied to messages with 1–6 kB of visible text by the
// attack generator (on the MIME message, not on a token list), mean S1 and
// S3 between the fingerprints of the original and the attacked copy for
// four sifting systems. signature.TestSiftTable2 runs the paper's own
// setting (Reuters articles, token lists).
type MalkinResult struct {
	Docs    int         `json:"docs"`
	Source  string      `json:"source"`
	Modulus int         `json:"modulus"`
	Systems []string    `json:"systems"`
	Rows    []MalkinRow `json:"rows"`
}

// MalkinRow is one attack: mean S1 and S3 per system, and the paper's.
type MalkinRow struct {
	Attack string       `json:"attack"`
	S1     []float64    `json:"s1"`
	S3     []float64    `json:"s3"`
	Paper  [][2]float64 `json:"paper"`
}

var malkinSystems = []struct {
	name string
	f    signature.SiftFormation
	b    int
}{
	{"sliding window", signature.SiftWindow, 1},
	{"random skipping", signature.SiftSkip, 1},
	{"sliding window + partitioning", signature.SiftWindow, 2},
	{"random skipping + partitioning", signature.SiftSkip, 2},
}

// malkinPaper is Table 2 of the paper (pure hashing): S1, S3 per system.
var malkinPaper = [8][4][2]float64{
	{{0, 0}, {0.184, 0.339}, {0.152, 0.287}, {0.182, 0.332}},
	{{0.00114, 0.00264}, {0.187, 0.354}, {0.157, 0.296}, {0.190, 0.346}},
	{{0.000676, 0.00148}, {0.0557, 0.115}, {0.0482, 0.0969}, {0.064, 0.129}},
	{{0, 0}, {0.115, 0.228}, {0.0914, 0.180}, {0.109, 0.211}},
	{{0.242, 0.422}, {0.248, 0.431}, {0.245, 0.427}, {0.238, 0.415}},
	{{0.205, 0.379}, {0.216, 0.389}, {0.205, 0.375}, {0.218, 0.387}},
	{{0.194, 0.347}, {0.109, 0.213}, {0.127, 0.243}, {0.106, 0.203}},
	{{0.205, 0.370}, {0.151, 0.287}, {0.174, 0.317}, {0.155, 0.285}},
}

var malkinAttacks = []string{
	"malkin-intelligent-add", "malkin-intelligent-delete", "malkin-intelligent-change", "malkin-intelligent-combination",
	"malkin-random-add", "malkin-random-delete", "malkin-random-change", "malkin-random-combination",
}

func runMalkin(cfg *Config, ham []Item, res *Resources, rep *Report) error {
	t := time.Now()
	p, err := cfg.NewPipeline()
	if err != nil {
		return err
	}
	defer p.Close()
	rng := rand.New(rand.NewPCG(cfg.Seed, seedOf("malkin")))
	// 100 messages with 1–6 kB of visible text, as the paper's articles.
	var docs []*Mail
	for _, i := range rng.Perm(len(ham)) {
		if len(docs) == 100 {
			break
		}
		m, err := Load(ham[i].Raw)
		if err != nil {
			continue
		}
		a := p.Analyze(NewCopy(m, Person{}, rng, res).Apply(), nil)
		n := 0
		for _, part := range a.Text.Parts {
			n += len(part.Text)
		}
		if n >= 1000 && n <= 6000 {
			docs = append(docs, m)
		}
	}
	sifts := make([]*signature.Sift, len(malkinSystems))
	out := &MalkinResult{Docs: len(docs), Source: "ham messages (SpamAssassin/CSDMC) with 1–6 kB of visible text", Modulus: cfg.Params.Sift.Modulus}
	for i, s := range malkinSystems {
		sp := cfg.Params.Sift
		sp.Enabled, sp.Formation, sp.Partitions = true, s.f, s.b
		if sifts[i], err = signature.NewSift(cfg.Secret, sp); err != nil {
			return fmt.Errorf("malkin: %w", err)
		}
		out.Systems = append(out.Systems, s.name)
	}
	orig := make([][][]uint64, len(docs))
	for d, m := range docs {
		doc := p.Analyze(NewCopy(m, Person{}, rng, res).Apply(), nil).Doc
		for _, s := range sifts {
			orig[d] = append(orig[d], s.Fingerprint(doc, signature.PureHashing))
		}
	}
	for ai, name := range malkinAttacks {
		atk, err := AttackByName(name)
		if err != nil {
			return err
		}
		if ai < 4 {
			// The paper's positions 9, 19, 29, …, not a phase per copy.
			k := ai
			atk = &Attack{Name: name, apply: func(c *Copy) { c.editWords(intelligentEdit(k, 8, c.Rng, c.Res.Vocab)) }}
		}
		row := MalkinRow{Attack: name, S1: make([]float64, len(sifts)), S3: make([]float64, len(sifts))}
		for si := range sifts {
			row.Paper = append(row.Paper, malkinPaper[ai][si])
		}
		for d, m := range docs {
			crng := rand.New(rand.NewPCG(cfg.Seed, seedOf("malkin", name, itoa(d))))
			doc := p.Analyze(NewCopy(m, Person{}, crng, res).Apply(atk), nil).Doc
			for si, s := range sifts {
				fa := s.Fingerprint(doc, signature.PureHashing)
				row.S1[si] += signature.S1(orig[d][si], fa) / float64(len(docs))
				row.S3[si] += signature.S3(orig[d][si], fa) / float64(len(docs))
			}
		}
		out.Rows = append(out.Rows, row)
	}
	rep.Malkin = out
	cfg.logf("malkin: %d messages (%s)", len(docs), time.Since(t).Round(time.Millisecond))
	return nil
}
