package soak

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/bulkmilter/bulkmilter/lab/load"
)

// campaigns is how many distinct mailings the pool holds; each pool
// message is a personalised copy of one of them, so the daemon sees both
// mass mailings crossing the threshold and their recipients' names.
const campaigns = 40

var vocabulary = strings.Fields(`apple river mountain letter window garden silver motor
planet history market winter doctor village camera bridge pencil ocean castle
engine island forest basket mirror rocket violin coffee butter candle jacket
ladder marble needle orange parrot rabbit saddle tunnel wagon yellow zebra
meadow harbor lantern compass blanket cottage feather glacier hammock iceberg
journal kettle lemonade magnet notebook orchard pillow quarry ribbon sailboat
teapot umbrella vessel walnut anchor biscuit canyon dolphin emerald falcon
offer price order account delivery member discount shipping season product
service support update invoice payment review weekly guide spring planting`)

var names = strings.Fields(`Anna Boris Chloe Dmitri Elena Farid Greta Hugo Irina Jonas Kira Luca
Maya Nikolai Olga Pavel Quinn Rosa Sergei Tanya Umar Vera Wen Xenia Yuri Zara`)

// Pool returns n distinct messages: personalised copies of 40 campaigns,
// each to its own recipient and salted with a random token, the same for
// a given n every time.
func Pool(n int) []load.Message {
	texts := make([]string, campaigns)
	for c := range texts {
		rng := rand.New(rand.NewPCG(uint64(c), 42))
		var b strings.Builder
		for i := range 120 {
			b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
			if i%14 == 13 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		texts[c] = b.String()
	}
	rng := rand.New(rand.NewPCG(7, 7))
	out := make([]load.Message, n)
	for k := range out {
		c := k % campaigns
		name := names[k%len(names)]
		rcpt := fmt.Sprintf("%s.%d@example.test", strings.ToLower(name), k)
		token := make([]byte, 8)
		for i := range token {
			token[i] = "bcdfghjklmnpqrstvwxz"[rng.IntN(20)]
		}
		out[k] = load.Message{
			From:  fmt.Sprintf("news@campaign%d.example", c),
			Rcpts: []string{rcpt},
			Raw: fmt.Appendf(nil, "From: Campaign %d <news@campaign%d.example>\r\nTo: %s <%s>\r\nSubject: %s, news from campaign %d\r\n"+
				"Message-ID: <%d.%s@campaign%d.example>\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"+
				"Dear %s,\r\n\r\n%s\r\nReference %s\r\n",
				c, c, name, rcpt, name, c, k, token, c, name, strings.ReplaceAll(texts[c], "\n", "\r\n"), token),
		}
	}
	return out
}
