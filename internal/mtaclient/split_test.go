package mtaclient

import (
	"reflect"
	"strings"
	"testing"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		fields    []field
		body      string
	}{
		{"simple", "A: 1\nB:2\n\nbody\n", []field{{"A", "1"}, {"B", "2"}}, "body\n"},
		{"crlf", "A: 1\r\n\r\nbody", []field{{"A", "1"}}, "body"},
		{"folded", "A: 1\n 2\n\t3\nB: x\n\nb", []field{{"A", "1\n 2\n\t3"}, {"B", "x"}}, "b"},
		{"folded last", "A: 1\n 2\n", []field{{"A", "1\n 2"}}, ""},
		{"no header", "just text\n", nil, "just text\n"},
		{"leading continuation", " x\nA: 1\n", nil, " x\nA: 1\n"},
		{"body without empty line", "A: 1\nnot a field\nmore", []field{{"A", "1"}}, "not a field\nmore"},
		{"no newline", "A: 1", []field{{"A", "1"}}, ""},
	} {
		fields, body := split([]byte(tc.msg))
		if !reflect.DeepEqual(fields, tc.fields) || string(body) != tc.body {
			t.Errorf("%s: split = %q, %q; want %q, %q", tc.name, fields, body, tc.fields, tc.body)
		}
	}
}

// A header folded many thousand times splits whole. (Appending each
// continuation line to a string made this quadratic: 16 s for 1 MB; now
// the test takes milliseconds and would hit the test timeout otherwise.)
func TestSplitLongFoldedHeader(t *testing.T) {
	msg := "Subject: x" + strings.Repeat("\n folded", 200_000) + "\n\nbody"
	fields, body := split([]byte(msg))
	if len(fields) != 1 || len(fields[0].value) != len(msg)-len("Subject: \n\nbody") || string(body) != "body" {
		t.Fatalf("split: %d fields, value %d bytes, body %q", len(fields), len(fields[0].value), body)
	}
}
