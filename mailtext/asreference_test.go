package mailtext

import (
	"bytes"
	"strings"
	"testing"
)

// refEmit and refCountChars are emit and countChars as they were before
// their byte classes came from one table (htmlByte).
func (x *htmlExtractor) refEmit(t []byte) {
	for i := 0; i < len(t); {
		c := t[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' {
			x.sp = true
			i++
			continue
		}
		if c == 0xC2 && i+1 < len(t) && t[i+1] == 0xA0 {
			x.sp = true
			i += 2
			continue
		}
		if x.nl {
			if len(x.out) > 0 {
				x.out = append(x.out, '\n')
			}
			x.nl, x.sp = false, false
		} else if x.sp {
			if len(x.out) > 0 && x.out[len(x.out)-1] != '\n' {
				x.out = append(x.out, ' ')
			}
			x.sp = false
		}
		j := i + 1
		for j < len(t) {
			c := t[j]
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == 0xC2 {
				break
			}
			j++
		}
		x.out = append(x.out, t[i:j]...)
		i = j
	}
}

func refCountChars(t []byte) int {
	n := 0
	for i := 0; i < len(t); i++ {
		c := t[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
		case c&0xC0 == 0x80:
		case c == 0xC2 && i+1 < len(t) && t[i+1] == 0xA0:
			i++
		default:
			n++
		}
	}
	return n
}

// FuzzEmitAsReference holds emit and countChars to their former code, on
// two texts in a row (the second sees the first's pending space).
func FuzzEmitAsReference(f *testing.F) {
	for _, s := range []string{"a  b\tc\r\n", "\u00a0x\u00a0\u00a0y\xc2", "\xc2\xa0", "é à\f", ""} {
		f.Add([]byte(s), []byte(" next\u00a0"), false)
	}
	f.Fuzz(func(t *testing.T, a, b []byte, nl bool) {
		if got, want := countChars(a), refCountChars(a); got != want {
			t.Fatalf("countChars(%q) = %d, reference %d", a, got, want)
		}
		var x, y htmlExtractor
		x.nl, y.nl = nl, nl
		x.emit(a)
		x.emit(b)
		y.refEmit(a)
		y.refEmit(b)
		if string(x.out) != string(y.out) || x.sp != y.sp || x.nl != y.nl {
			t.Fatalf("emit(%q, %q) = %q, reference %q", a, b, x.out, y.out)
		}
	})
}

// FuzzHostASCIIAsIDNA holds hostASCII to IDNA's ToASCII, which it skips
// for ASCII hosts without a punycode label: IDNA gives them back as they
// are or rejects them, and a rejected ASCII host is kept as it is.
func FuzzHostASCIIAsIDNA(f *testing.F) {
	for _, s := range []string{"example.com", "a_b.example", "-x-.com", "ab--cd.org", "xn--e1afmkfd.xn--p1ai",
		"münchen.de", "1.2.3.4", "a..b", "", ".", "x y.com", "a\x00b.com", "\x7f.com", "xn--.com", "ab-.c"} {
		f.Add(s)
	}
	f.Fuzz(checkHostASCII)
}

// TestHostASCIIAsIDNA runs FuzzHostASCIIAsIDNA's check on every ASCII
// host of up to three characters from an alphabet of IDNA's edge cases.
func TestHostASCIIAsIDNA(t *testing.T) {
	alpha := []string{"a", "Z", "0", "-", ".", "_", " ", "\x00", "~", "xn--", "é"}
	var hosts []string
	var grow func(string, int)
	grow = func(s string, n int) {
		hosts = append(hosts, s)
		if n == 0 {
			return
		}
		for _, c := range alpha {
			grow(s+c, n-1)
		}
	}
	grow("", 4)
	for _, host := range hosts {
		checkHostASCII(t, host)
	}
}

func checkHostASCII(t *testing.T, host string) {
	host = strings.ToLower(host)
	want, err := idnaProfile.ToASCII(host)
	wantOK := true
	if err != nil {
		want, wantOK = host, isASCIIString(host)
	}
	if got, ok := hostASCII(host); got != want || ok != wantOK {
		t.Fatalf("hostASCII(%q) = %q, %v; IDNA %q, %v", host, got, ok, want, wantOK)
	}
}

// refDecodeQP is decodeQP as it was, a byte at a time.
func refDecodeQP(dst, src []byte) (out []byte, bad bool) {
	for len(src) > 0 {
		nl := bytes.IndexByte(src, '\n')
		var line []byte
		hasNL := nl >= 0
		if hasNL {
			line, src = src[:nl], src[nl+1:]
		} else {
			line, src = src, nil
		}
		line = bytes.TrimRight(line, " \t\r")
		soft := false
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c != '=' {
				dst = append(dst, c)
				continue
			}
			if i == len(line)-1 {
				soft = true
				break
			}
			if i+2 < len(line) {
				if hi, lo := unhex(line[i+1]), unhex(line[i+2]); hi >= 0 && lo >= 0 {
					dst = append(dst, byte(hi<<4|lo))
					i += 2
					continue
				}
			}
			bad = true
			dst = append(dst, '=')
		}
		if hasNL && !soft {
			dst = append(dst, '\n')
		}
	}
	return dst, bad
}

// FuzzDecodeQPAsReference holds decodeQP to its former code.
func FuzzDecodeQPAsReference(f *testing.F) {
	for _, s := range []string{"a=3Db=\nc", "=", "==", "=4", "=4g=41", "x = \r\ny=\r\n", "=E9t=C3=A9\n\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		got, gbad := decodeQP([]byte("pre"), src)
		want, wbad := refDecodeQP([]byte("pre"), src)
		if string(got) != string(want) || gbad != wbad {
			t.Fatalf("decodeQP(%q) = %q, %v; reference %q, %v", src, got, gbad, want, wbad)
		}
	})
}

// refGuessLegacyCounts is guessLegacy's former byte count, a switch a byte.
func refGuessLegacyCounts(raw []byte) (ascii, c0, e0, a0 int) {
	for _, c := range raw {
		switch {
		case c >= 0xE0:
			e0++
		case c >= 0xC0:
			c0++
		case c >= 0x80 && c < 0xB0:
			a0++
		case c < 0x80 && (c|0x20 >= 'a' && c|0x20 <= 'z'):
			ascii++
		}
	}
	return
}

// TestLegacyClassAsReference holds legacyClass to the former switch on
// every byte, which makes guessLegacy's counts the same on any input.
func TestLegacyClassAsReference(t *testing.T) {
	for c := range 256 {
		var n [5]int
		n[legacyClass[c]]++
		ascii, c0, e0, a0 := refGuessLegacyCounts([]byte{byte(c)})
		if n[1] != ascii || n[2] != a0 || n[3] != c0 || n[4] != e0 {
			t.Errorf("byte %#x: class %d, reference ascii %d a0 %d c0 %d e0 %d", c, legacyClass[c], ascii, a0, c0, e0)
		}
	}
}
