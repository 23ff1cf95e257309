package signature_test

import (
	"fmt"
	"os"
	"strings"
	"unicode"

	"github.com/bulkmilter/bulkmilter/signature"
)

// Signing a document with every family. In the daemon the Doc comes from
// Canonicalize and the lexicon from package bundled.
func ExampleSet() {
	secret, err := signature.NewSecret([]byte("use 32 random bytes from the config here"))
	if err != nil {
		fmt.Println(err)
		return
	}
	raw, err := os.ReadFile("testdata/lexicon-20ng-600.bmlx")
	if err != nil {
		fmt.Println(err)
		return
	}
	lex, err := signature.LoadLexicon(raw)
	if err != nil {
		fmt.Println(err)
		return
	}
	p := signature.DefaultSetParams()
	p.Secret, p.Lexicon = secret, lex
	set, err := signature.NewSet(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	text, err := os.ReadFile("testdata/golden/fixtures/newsletter.txt")
	if err != nil {
		fmt.Println(err)
		return
	}
	// A crude stand-in for Canonicalize: lower-case runs of letters.
	tokens := strings.FieldsFunc(strings.ToLower(string(text)), func(r rune) bool { return !unicode.IsLetter(r) })
	doc := &signature.Doc{Tokens: tokens, Letters: strings.Join(tokens, "")}
	keys, explains := set.Sign(doc, nil, nil)
	for _, e := range explains {
		if e.Declined != "" {
			fmt.Printf("%s declined: %s\n", e.Family, e.Declined)
			continue
		}
		fmt.Printf("%s: %d keys\n", e.Family, e.Keys)
	}
	fmt.Println(strings.HasPrefix(set.StoreID(keys[0]), set.Version()+":imatch.0:"))
	// Output:
	// imatch: 9 keys
	// shingle: 5 keys
	// charshingle: 5 keys
	// sift: 4 keys
	// terms: 10 keys
	// contain: 16 keys
	// attach declined: no attachment
	// lines declined: no lines (a Doc not from Canonicalize)
	// true
}
