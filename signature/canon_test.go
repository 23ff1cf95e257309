package signature

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func canon(s string) *Doc { return Canonicalize(Source{Parts: []string{s}}) }

// TestCanonEquivalence is the core property: copies of one text that
// differ only by a trick give the same tokens and letters. Each class has
// several variants, beyond the textbook instance, because held-out
// campaigns use variations of their own.
func TestCanonEquivalence(t *testing.T) {
	classes := []struct {
		name     string
		base     string
		variants []string
	}{
		{"zero-width and format characters", "Your PayPal account is verified",
			[]string{
				"Your Pay\u200bPal account is veri\u200cfied",
				"Your P\u200da\u2060y\uFEFFPal ac\u00adcount is verified",
				"Your PayP\u034Fal account is ver\u2062ified",
				"Your Pay\U000E0020Pal acc\u200eount is verif\u200fied",
				"Your Pa\u180Ey\uFE0FPal account is verified",
				"Y\u202Aour PayPal\u202C account is verified",
			}},
		{"homoglyphs from other scripts", "Your PayPal account is verified",
			[]string{
				"Your \u0420ay\u0420al account is verified",           // Cyrillic Р
				"Your P\u0430yP\u0430l \u0430ccount is verified",      // Cyrillic а
				"Your \u03A1ayPal acc\u03BFunt is verified",           // Greek Ρ, ο
				"Y\u043Eur PayPal acc\u043Eunt \u0456s v\u0435rified", // Cyrillic о, і, е
				"Your PayPal account is verified",
				"Your P\u0251yP\u0251l account is verified",                                                  // Latin alpha
				"Your \u13E2ayPal account is verified",                                                       // Cherokee
				"Your \u0555\u0580 PayPal account is verified"[0:0] + "Your PayPal acc\u0585unt is verified", // Armenian o
			}},
		{"compatibility forms", "Your PayPal account is verified",
			[]string{
				"Your \uFF30\uFF41\uFF59\uFF30\uFF41\uFF4C account is verified",                         // fullwidth
				"Your \U0001D40F\U0001D41A\U0001D432\U0001D40F\U0001D41A\U0001D425 account is verified", // math bold
				"Your \u24C5\u24D0\u24E8\u24C5\u24D0\u24DB account is verified",                         // circled
				"Your \u1D18\u1D00\u028F\u1D18\u1D00\u029F account is verified",                         // small capitals
				"Your PayPal account is \U0001D5CF\U0001D5BE\U0001D5CB\U0001D5C2\U0001D5BF\U0001D5C2\U0001D5BE\U0001D5BD",
				"Your \U0001F17F\U0001F170\U0001F188\U0001F17F\U0001F170\U0001F17B account is verified",                               // negative squared
				"Your \U0001F15F\U0001F150\U0001F168\U0001F15F\U0001F150\U0001F15B account is verified",                               // negative circled
				"Your \U0001F1F5\u200b\U0001F1E6\u200b\U0001F1FE\u200b\U0001F1F5\u200b\U0001F1E6\u200b\U0001F1F1 account is verified", // regional indicators
				"Your PayPal\u2122 account is verified\u00ae",
				"Your \u2164ayPal account is verified"[0:0] + "Your PayPal account is \u2174erified", // Roman numeral five
			}},
		{"case and the I/l/1 class", "Your PayPal account is verified",
			[]string{
				"YOUR PAYPAL ACCOUNT IS VERIFIED",
				"your paypal account is verified",
				"Your PayPaI account is verified",      // capital I for l
				"Your PayPa1 account is verified",      // digit one
				"Your PayPa| account is verified",      // bar
				"Your PayPa\u0406 account is verified", // Cyrillic І
				"Your PayPa\u01C0 account is verified", // Latin dental click
			}},
		{"leetspeak", "Buy viagra and cialis now",
			[]string{
				"Buy v1agra and c1alis now",
				"Buy vi@gra and ci@lis now",
				"Buy V1@GR@ and C1@L1$ now",
				"Buy v!agra and cia|is now",
				"Buy \\/iagra and cialis now",
				"Buy via9ra and cia1is n0w",
				"Buy v|agr@ and (cialis) now!!!",
				"Buy v-1-@-g-r-@ and c.i.a.l.i.s now",
				"Buy V.1.A.G.R.A and ci@|is now",
				"Buy v\u0456@gr@ and cial\u0456s now",
				"Buy v!@gr@ and c!@l!$ now",
				"Buy \\/1@9r@ and cialis n0w",
				"Buy viagra and cia11s now",
				"Buy viagr4 and cialis now",
				"Bu¥ viagra and cialis now",
			}},
		{"digits for letters at word edges", "Order from our online shop today, email us",
			[]string{
				"0rder fr0m 0ur 0nline sh0p t0day, emai1 us",
				"Order from 0ur onl1ne shop t0d@y, ema1l us",
				"ORDER FROM OUR ONL|NE SHOP TODAY, EMAI| US",
			}},
		{"leetspeak at word starts, at word ends and in long runs", "Thousands of improvements at the lowest rates, credit consolidation for those",
			[]string{
				"7housands of !mprovements at the 10west ra735, cred17 c0n501!dation for 7hose",
				"Thousand$ of impr0v3m3n7s at the l0w3s7 r@7e5, cr3d17 consolid@7ion for those",
				"7h0u5@nd5 of !mpr0vemen7s at the lowes7 rates, credi7 con$0l1da7!on for tho5e",
				"Th0usands of improvemen75 at the 10w35t ra7es, credit consolidation for th05e",
				"Thousands of improvements at the lowest rates, credit c0n$0l!d47!0n for those",
			}},
		{"short words with leetspeak at both edges or at the end", "Get into the last deal but not now",
			[]string{
				"Get !nt0 the 1as7 deal bu7 no7 now",
				"Get in7o the la$t dea1 but n0t now",
			}},
		{"doubled letters and letter-like Latin letters", "A top team of British scientists and medical doctors developed it",
			[]string{
				"A top teamm of \u00DFritish scientistss and med\u00EDca| doctoors developed it",
				"A toop team of Britiish sci\u00E9ntists and medical doctorss deevelopped it",
				"A top team of British scientists and medical doctors d\u0113v\u0113loped it",
				"A top team of \u0180ritish scientists and medical \u0111octors developed it",
			}},
		{"letters spaced apart", "Buy viagra now",
			[]string{
				"Buy v i a g r a now",
				"Buy V I A G R A now",
				"Buy V-I-A-G-R-A now",
				"Buy V.I.A.G.R.A now",
				"Buy V_I_A_G_R_A now",
				"Buy V * I * A * G * R * A now",
				"Buy v  i  a  g  r  a now",
				"Buy v\ti\ta\tg\tr\ta now",
				"Buy V I @ G R @ now",
				"Buy v\u00a0i\u00a0a\u00a0g\u00a0r\u00a0a now",
				"Buy\nV\nI\nA\nG\nR\nA\nnow",
				"Buy V\u2022I\u2022A\u2022G\u2022R\u2022A now",
				"Buy V\u200bi\u200ba\u200bg\u200br\u200ba now",
			}},
		{"spaced words keep their word breaks", "free money today",
			[]string{
				"F R E E  M O N E Y  T O D A Y",
				"f r e e   m o n e y   t o d a y",
				"F-R-E-E M-O-N-E-Y T-O-D-A-Y",
				"F R E E\nM O N E Y\nT O D A Y",
			}},
		{"punctuation inside words", "Buy viagra now",
			[]string{
				"Buy vi-agra now",
				"Buy vi.agra now",
				"Buy vi'agra now",
				"Buy vi*agra now",
				"Buy vi_agra now",
				"Buy v~i~a~g~r~a now",
				"Buy vi\u2027agra now",
			}},
		{"accents and combining marks", "Buy viagra now",
			[]string{
				"Buy v\u00EFagr\u00E0 now",
				"Buy vi\u0301agra now",
				"Buy V\u0338\u0322i\u0337a\u0335g\u0336r\u0338a now", // Zalgo
				"Buy v\u0131agra now",                                // dotless i
			}},
		{"right-to-left override", "Buy viagra now",
			[]string{
				"Buy \u202Eargaiv\u202C now",
				"Buy \u202Eargaiv\n now",
			}},
		{"blank characters between words", "Buy viagra now",
			[]string{
				"Buy\u00a0viagra\u2003now",
				"Buy\u3000viagra\u205Fnow",
				"Buy\u3164viagra\u2800now",
				"Buy\u2028viagra\u0085now",
			}},
		{"numbers and ids", "Order 12345 for John shipped on 2024-05-01",
			[]string{
				"Order 98765 for John shipped on 2023-12-31",
				"Order #4 for John shipped on 1/1/2025",
				"Order 1,234,567.00 for John shipped on 2024.05.01",
			}},
		{"Cyrillic word with Latin lookalikes", "Большая скидка на все товары сегодня",
			[]string{
				"Большая cкидка на все товары сегодня", // Latin c
				"Большая скидкa на все тoвары сегoдня", // Latin a, o
				"БОЛЬШАЯ CКИДКА НА ВCЕ ТОВАРЫ СЕГОДНЯ", // Latin C
				"Больш\u0430я ск\u0456дк\u0430 н\u0430 все товары сегодня"[0:0] + "Большая ск\u200bидка на все товары сегодня",
				"Большая с к и д к а на все товары сегодня",
			}},
		{"whole-word lookalikes in a Latin text", "Pay your tax today and come to the cocoa shop in America",
			[]string{
				"Pay your \u0422\u0410\u0425 today and come to the cocoa shop in America",           // ТАХ
				"Pay your tax today and \u0421\u041E\u041C\u0415 to the cocoa shop in America",      // СОМЕ
				"Pay your tax today and come to the \u0441\u043E\u0441\u043E\u0430 shop in America", // сосоа
				"Pay your tax today and come to the cocoa shop in \u0410m\u0435r\u0456c\u0430",
				"\u0420\u0430y your tax today and come to the cocoa shop in America",
			}},
	}
	for _, c := range classes {
		t.Run(c.name, func(t *testing.T) {
			want := canon(c.base)
			if len(want.Tokens) == 0 {
				t.Fatalf("base %q gave no tokens", c.base)
			}
			for _, v := range c.variants {
				got := canon(v)
				if strings.Join(got.Tokens, " ") != strings.Join(want.Tokens, " ") {
					t.Errorf("variant %q:\n got tokens %q\nwant tokens %q", v, got.Tokens, want.Tokens)
				}
				if got.Letters != want.Letters {
					t.Errorf("variant %q:\n got letters %q\nwant letters %q", v, got.Letters, want.Letters)
				}
			}
		})
	}
}

// TestCanonLettersIgnoreSpacing: the letters stream does not depend on
// where spaces are.
func TestCanonLettersIgnoreSpacing(t *testing.T) {
	base := canon("Buy viagra now from our shop, I saw a 3 hour video")
	for _, v := range []string{"Buy via gra now from our shop, I saw a 3 hour video", "Buyviagra nowfrom our shop, I sawa 3 hour video",
		"B uy viagr a now fr om our sh op, I sa w a 3 hour video", "Buy viagra now from our shop, I s a w a 3 h our video"} {
		if got := canon(v); got.Letters != base.Letters {
			t.Errorf("%q: got letters %q, want %q", v, got.Letters, base.Letters)
		}
	}
}

// TestCanonKeepsScripts: plain Russian, Greek, Ukrainian and mixed-language
// text is not folded into another script.
func TestCanonKeepsScripts(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
		script     *unicode.RangeTable
	}{
		{"Russian", "Привет, мир! Мы рады предложить вам скидку. Ёлка, йогурт, щука, СССР, Орел.",
			[]string{"привет", "мир", "мы", "рады", "предложить", "вам", "скидку", "елка", "йогурт", "щука", "ср", "орел"}, unicode.Cyrillic},
		{"Russian made of lookalike letters", "а в сосоа Ах ох, ТАХ СОМЕ рое",
			[]string{"а", "в", "сосоа", "ах", "ох", "тах", "соме", "рое"}, unicode.Cyrillic},
		{"Greek", "Καλημέρα κόσμε! Η ΠΡΟΣΦΟΡΑ ισχύει σήμερα, Αθηνά.",
			[]string{"καλημερα", "κοσμε", "η", "προσφορα", "ισχυει", "σημερα", "αθηνα"}, unicode.Greek},
		{"Ukrainian", "Їжак і ґанок, європейський вибір",
			[]string{"іжак", "і", "ґанок", "європейський", "вибір"}, unicode.Cyrillic},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := canon(tc.text)
			if strings.Join(d.Tokens, " ") != strings.Join(tc.want, " ") {
				t.Errorf("tokens: got %q, want %q", d.Tokens, tc.want)
			}
			for _, tok := range d.Tokens {
				for _, r := range tok {
					if !unicode.Is(tc.script, r) {
						t.Errorf("token %q has %q outside the text's script", tok, r)
					}
				}
			}
			if d.Stats.Folded != 0 {
				t.Errorf("%d tokens folded in plain text", d.Stats.Folded)
			}
		})
	}
	// Latin words in a Russian text stay Latin, Russian words in an
	// English text stay Russian unless they are made of lookalikes.
	d := canon("Купите iPhone и Samsung сегодня")
	if got := strings.Join(d.Tokens, " "); got != "купите iphone и samsung сегодня" {
		t.Errorf("brand names in Russian text: got %q", got)
	}
	d = canon("The word привет means hello in Russian and the word спасибо means thanks")
	if !strings.Contains(strings.Join(d.Tokens, " "), "привет") || !strings.Contains(strings.Join(d.Tokens, " "), "спасибо") {
		t.Errorf("Russian words in English text: got %q", d.Tokens)
	}
}

// TestCanonCJK: runs of Han, kana and Thai become overlapping bigrams;
// the letters stream holds each character once.
func TestCanonCJK(t *testing.T) {
	tests := []struct {
		text    string
		tokens  string
		letters string
	}{
		{"東京都", "東京 京都", "東京都"},
		{"東京都に住んでいます。", "東京 京都 都に に住 住ん んで でい いま ます", "東京都に住んでいます"},
		{"我们公司，提供产品", "我们 们公 公司 提供 供产 产品", "我们公司提供产品"},
		{"カタカナ語", "カタカナ 語", "カタカナ語"},
		{"한국어 텍스트", "한국어 텍스트", "한국어텍스트"},
		{"中", "中", "中"},
		{"ＡＢＣ商品", "abc 商品", "abc商品"},
	}
	for _, tc := range tests {
		d := canon(tc.text)
		if got := strings.Join(d.Tokens, " "); got != tc.tokens {
			t.Errorf("%q: got tokens %q, want %q", tc.text, got, tc.tokens)
		}
		if d.Letters != tc.letters {
			t.Errorf("%q: got letters %q, want %q", tc.text, d.Letters, tc.letters)
		}
	}
}

func TestCanonNumbers(t *testing.T) {
	d := canon("Call 555-1234 now, 100mg for $19.99, covid19 win10 2nd")
	want := "cai now 0mg for covidig winio 0nd"
	if got := strings.Join(d.Tokens, " "); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if d.Stats.NonLetterRun != 2 {
		t.Errorf("NonLetterRun: got %d, want 2", d.Stats.NonLetterRun)
	}
}

// TestCanonOrdinaryNumbers: reading leetspeak at word edges must leave
// numbers, prices, versions, dates, times, ordinals and quantities with
// their unit as they are.
func TestCanonOrdinaryNumbers(t *testing.T) {
	tests := []struct{ text, tokens string }{
		{"1.2.3 2.0.1-rc1 v2.0 V10", "0rci v0 v0"},
		{"2024-01-15 15/01/2024 15.01.2024 15:30 10:45:00", ""},
		{"$19.99 $5 €20 20€ £1,000.00 1,000.00 5% -10 +3", ""},
		{"US$5 10USD 100usd 50EUR 10eur", "us 0usd 0usd 0eur 0eur"},
		{"10mg 100mg 30min 24hrs 10am 9am 7pm 5pm 3am 8am", "0mg 0mg 0min 0hrs 0am 0am 0pm 0pm 0am 0am"},
		{"1st 2nd 3rd 4th 7th 13th 19th 1990s 2000s", "0st 0nd 0rd 0th 0th 0th 0th 0s 0s"},
		{"10x 3x4 4k 1080p 64bit 3D", "0x 0x0 0k 0p 0bit 0d"},
		{"Call 555-1234 or +1 (800) 555-0199, ext. 42", "cai or ext"},
		{"room 101, flight BA2490, order #A-4482-X", "rom fight ba0 order a0x"},
		{"on 10May03 at 1.0rc1, 15-Jun-2024, 3x, 4x4", "on 0may0 at 0rci 0jun0 0x 0x0"},
	}
	for _, tc := range tests {
		if got := strings.Join(canon(tc.text).Tokens, " "); got != tc.tokens {
			t.Errorf("%q: got %q, want %q", tc.text, got, tc.tokens)
		}
	}
}

func TestCanonLinksDropped(t *testing.T) {
	d := canon("Visit http://example.com/path?x=1 or www.example.org or mail john.doe@example.net today")
	want := "visit or or mai today"
	if got := strings.Join(d.Tokens, " "); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestCanonStrip: the recipient's name and address parts are removed,
// whatever their case or disguise in the text.
func TestCanonStrip(t *testing.T) {
	src := Source{
		Subject: "John, your invoice",
		Parts:   []string{"Dear JOHN SMITH, invoice for jsmith at example.com. Thanks, Jоhn (Cyrillic о)."},
		Strip:   []string{"John", "Smith", "jsmith", "example.com", "a"},
	}
	d := Canonicalize(src)
	got := strings.Join(d.Tokens, " ")
	if want := "your invoice dear invoice for at thanks cyric o"; got != want {
		t.Errorf("tokens: got %q, want %q", got, want)
	}
	if d.Stats.Stripped != 6 {
		t.Errorf("Stripped: got %d, want 6", d.Stats.Stripped)
	}
	if strings.Contains(d.Letters, "john") || strings.Contains(d.Letters, "smith") {
		t.Errorf("letters still hold the name: %q", d.Letters)
	}
	// Same message to another recipient: same canonical form.
	other := Canonicalize(Source{
		Subject: "Mary, your invoice",
		Parts:   []string{"Dear MARY JONES, invoice for mjones at example.org. Thanks, Mary (Cyrillic о)."},
		Strip:   []string{"Mary", "Jones", "mjones", "example.org"},
	})
	if strings.Join(other.Tokens, " ") != got || other.Letters != d.Letters {
		t.Errorf("personalised copies differ:\n%q\n%q", other.Tokens, d.Tokens)
	}
}

func TestCanonDomains(t *testing.T) {
	d := Canonicalize(Source{Domains: []string{"Example.COM", "example.com.", " пример.рф ", "example.com", "xn--e1afmkfd.xn--p1ai", ""}})
	if got := strings.Join(d.Domains, " "); got != "example.com xn--e1afmkfd.xn--p1ai" {
		t.Errorf("got %q", got)
	}
}

func TestCanonStats(t *testing.T) {
	d := Canonicalize(Source{Subject: "V i a g r a", Parts: []string{"Pay\u200bPal v1agra 12345"}})
	s := d.Stats
	if s.Words != 3 || s.Joined != 1 || s.Removed != 1 || s.Folded != 1 || s.NonLetterRun != 1 {
		t.Errorf("stats: %+v", s)
	}
}

// TestCanonInvariants checks the form of the output on awkward input.
func TestCanonInvariants(t *testing.T) {
	inputs := []string{"", " ", "\x00\x01", "\xff\xfe invalid", "!!! ??? ...", "12345 67890", "a", "a b", "\u202E", "\u200b\u200b",
		strings.Repeat("x", 100000), strings.Repeat("a ", 50000), strings.Repeat("東", 1000), "|<|<|<", "@@@ $$$", "\\/\\/\\/"}
	for _, in := range inputs {
		d := Canonicalize(Source{Subject: in, Parts: []string{in}, Strip: []string{in}})
		for _, tok := range d.Tokens {
			if tok == "" || !utf8.ValidString(tok) || strings.ContainsFunc(tok, unicode.IsSpace) {
				t.Errorf("%.20q: bad token %q", in, tok)
			}
		}
		if !utf8.ValidString(d.Letters) || strings.ContainsFunc(d.Letters, unicode.IsSpace) {
			t.Errorf("%.20q: bad letters %q", in, d.Letters)
		}
		if d.Stats.Words != len(d.Tokens) {
			t.Errorf("%.20q: Words=%d, %d tokens", in, d.Stats.Words, len(d.Tokens))
		}
	}
}

// TestCanonDeterministic: the pooled state leaks nothing between calls.
func TestCanonDeterministic(t *testing.T) {
	a := canon("Привет cкидка V1AGRA 東京都 F R E E")
	for i := 0; i < 100; i++ {
		canon(strings.Repeat("other text ", i))
		b := canon("Привет cкидка V1AGRA 東京都 F R E E")
		if strings.Join(a.Tokens, " ") != strings.Join(b.Tokens, " ") || a.Letters != b.Letters || a.Stats != b.Stats {
			t.Fatalf("run %d differs: %q vs %q", i, b.Tokens, a.Tokens)
		}
	}
}
