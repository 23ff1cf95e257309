package eval

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/bulkmilter/bulkmilter/signature"
)

// KolczResult is Kolcz & Chowdhury 2008 §6.4's protocol on one spam
// collection: a random 10 % of it are queries; a query's near duplicates
// are the documents with unique-term cosine ≥ 0.9 (their eq. 2); recall is
// the share of those an I-Match configuration finds (shares a key with the
// query), averaged over queries that have any.
type KolczResult struct {
	Dataset        string     `json:"dataset"`
	Docs           int        `json:"docs"`
	Queries        int        `json:"queries"`
	WithNeighbours int        `json:"queries_with_neighbours"`
	Legit          int        `json:"legit_docs"`
	Rows           []KolczRow `json:"rows"`
}

// KolczRow is one I-Match configuration.
type KolczRow struct {
	K           int     `json:"k"`
	Hardening   string  `json:"hardening"`
	Recall      float64 `json:"recall"`
	RelIncrease float64 `json:"relative_increase"` // over K = 0 with the same hardening
	// Precision is the paper's eq. 4: the share of found documents that
	// are cosine neighbours, averaged over queries that found any.
	Precision float64 `json:"precision"`
	// LegitMatched counts legitimate documents sharing a key with any
	// query (Kolcz: none).
	LegitMatched int `json:"legit_matched"`
}

// kdoc is a document as the protocol sees it.
type kdoc struct {
	doc   *signature.Doc
	terms []string // unique I-Match terms, sorted
}

// kolczDocs analyses messages with the pipeline and applies the paper's
// preprocessing: unique I-Match terms, at least five, trivial duplicates
// (the same term set) removed.
func kolczDocs(p Pipeline, items []Item, dedupe bool) []kdoc {
	seen := map[string]bool{}
	var out []kdoc
	for _, it := range items {
		d := p.Analyze(it.Raw, nil).Doc
		var terms []string
		for _, t := range d.Tokens {
			if signature.IMatchTerm(t) {
				terms = append(terms, t)
			}
		}
		slices.Sort(terms)
		terms = slices.Compact(terms)
		if len(terms) < 5 {
			continue
		}
		if dedupe {
			key := strings.Join(terms, " ")
			if seen[key] {
				continue
			}
			seen[key] = true
		}
		out = append(out, kdoc{doc: d, terms: terms})
	}
	return out
}

func runKolcz(cfg *Config, ham []Item, rep *Report) error {
	t := time.Now()
	p, err := cfg.NewPipeline()
	if err != nil {
		return err
	}
	defer p.Close()
	legit := kolczDocs(p, ham, false)
	sets := []struct {
		name string
		load func() ([]Item, error)
	}{
		{"enron-bg-spam (spam trap: Kolcz Table 2's honeypot)", func() ([]Item, error) { return EnronBGSpam(cfg.Corpora) }},
	}
	if !cfg.CI {
		sets = append(sets, struct {
			name string
			load func() ([]Item, error)
		}{"phishing-pot (honeypot)", func() ([]Item, error) {
			s, err := PhishingPot(cfg.Corpora)
			if err != nil {
				return nil, err
			}
			return s.Items, nil
		}})
	}
	for _, s := range sets {
		items, err := s.load()
		if err != nil {
			return err
		}
		docs := kolczDocs(p, items, true)
		r, err := kolcz(cfg, s.name, docs, legit)
		if err != nil {
			return err
		}
		rep.Kolcz = append(rep.Kolcz, r)
		cfg.logf("kolcz %s: %d docs, %d queries with neighbours (%s)", s.name, r.Docs, r.WithNeighbours, time.Since(t).Round(time.Millisecond))
	}
	return nil
}

func kolcz(cfg *Config, name string, docs, legit []kdoc) (*KolczResult, error) {
	r := &KolczResult{Dataset: name, Docs: len(docs), Legit: len(legit)}
	rng := rand.New(rand.NewPCG(cfg.Seed, seedOf("kolcz", name)))
	queries := rng.Perm(len(docs))[:len(docs)/10]
	slices.Sort(queries)
	r.Queries = len(queries)

	// Cosine neighbours through an inverted index.
	index := map[string][]int{}
	for i, d := range docs {
		for _, t := range d.terms {
			index[t] = append(index[t], i)
		}
	}
	neighbours := make([][]int, len(queries))
	common := make([]int, len(docs))
	for qi, q := range queries {
		clear(common)
		for _, t := range docs[q].terms {
			for _, j := range index[t] {
				common[j]++
			}
		}
		for j, c := range common {
			if j == q || c == 0 {
				continue
			}
			if float64(c)/math.Sqrt(float64(len(docs[q].terms))*float64(len(docs[j].terms))) >= 0.9 {
				neighbours[qi] = append(neighbours[qi], j)
			}
		}
		if len(neighbours[qi]) > 0 {
			r.WithNeighbours++
		}
	}

	for _, hard := range []signature.Hardening{signature.HardeningOff, signature.HardeningAlso} {
		var base float64
		for _, k := range []int{0, 2, 5, 10} {
			ip := cfg.Params.IMatch
			ip.Enabled, ip.Randomized, ip.Hardening = true, k, hard
			im, err := signature.NewIMatch(cfg.Secret, cfg.Lexicon, ip)
			if err != nil {
				return nil, fmt.Errorf("kolcz: %w", err)
			}
			byKey := map[signature.Key][]int{}
			keys := make([][]signature.Key, len(docs))
			for i, d := range docs {
				keys[i], _ = im.Sign(d.doc, nil)
				for _, key := range keys[i] {
					byKey[key] = append(byKey[key], i)
				}
			}
			legitKeys := map[signature.Key][]int{}
			for i, d := range legit {
				ks, _ := im.Sign(d.doc, nil)
				for _, key := range ks {
					legitKeys[key] = append(legitKeys[key], i)
				}
			}
			row := KolczRow{K: k, Hardening: string(hard)}
			var recall, prec float64
			precN := 0
			legitHit := map[int]bool{}
			for qi, q := range queries {
				found := map[int]bool{}
				for _, key := range keys[q] {
					for _, j := range byKey[key] {
						if j != q {
							found[j] = true
						}
					}
					for _, j := range legitKeys[key] {
						legitHit[j] = true
					}
				}
				hit := 0
				for _, j := range neighbours[qi] {
					if found[j] {
						hit++
					}
				}
				if len(neighbours[qi]) > 0 {
					recall += float64(hit) / float64(len(neighbours[qi]))
				}
				if len(found) > 0 {
					prec += float64(hit) / float64(len(found))
					precN++
				}
			}
			row.Recall = recall / float64(max(1, r.WithNeighbours))
			row.Precision = prec / float64(max(1, precN))
			row.LegitMatched = len(legitHit)
			if k == 0 {
				base = row.Recall
			}
			if base > 0 {
				row.RelIncrease = row.Recall/base - 1
			}
			r.Rows = append(r.Rows, row)
		}
	}
	return r, nil
}
