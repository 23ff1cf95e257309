package detect

import (
	"fmt"
	"maps"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	gomilter "github.com/d--j/go-milter"

	"github.com/bulkmilter/bulkmilter/internal/testenv"
)

// recorder is a milter that records what the MTA hands over.
type recorder struct {
	gomilter.NoOpMilter
	mu     *sync.Mutex
	done   map[string]recorded // by Message-ID
	fields []Field
	body   []byte
}

type recorded struct {
	fields []Field
	body   []byte
}

func (r *recorder) Header(name, value string, m gomilter.Modifier) (*gomilter.Response, error) {
	r.fields = append(r.fields, Field{name, value})
	return gomilter.RespContinue, nil
}

func (r *recorder) BodyChunk(c []byte, m gomilter.Modifier) (*gomilter.Response, error) {
	r.body = append(r.body, c...)
	return gomilter.RespContinue, nil
}

func (r *recorder) EndOfMessage(m gomilter.Modifier) (*gomilter.Response, error) {
	id := ""
	for _, f := range r.fields {
		if strings.EqualFold(f.Name, "Message-ID") {
			id = f.Value
		}
	}
	r.mu.Lock()
	r.done[id] = recorded{r.fields, r.body}
	r.mu.Unlock()
	r.fields, r.body = nil, nil
	return gomilter.RespAccept, nil
}

func (r *recorder) Abort(m gomilter.Modifier) error {
	r.fields, r.body = nil, nil
	return nil
}

// Split hands over exactly what a real Postfix hands a milter, field by
// field and byte for byte, for raw messages with the edge cases that
// differ between parsers. (Postfix itself is reached over SMTP, so the
// messages are CRLF text; LF files are split as their CRLF form, which
// TestSplit checks.)
func TestSplitAsPostfix(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	done := map[string]recorded{}
	srv := gomilter.NewServer(
		gomilter.WithMilter(func() gomilter.Milter { return &recorder{mu: &mu, done: done} }),
		gomilter.WithProtocols(gomilter.OptNoUnknown|gomilter.OptNoData))
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	pf := testenv.StartPostfix(t, testenv.PostfixOptions{MilterAddr: ln.Addr().String()})

	// Every message carries the fields Postfix would otherwise add.
	head := func(id string) string {
		return "Message-ID: <" + id + "@split.test>\r\nDate: Mon, 1 Jan 2024 00:00:00 +0000\r\nFrom: a@example.org\r\n"
	}
	var many strings.Builder
	for i := range 300 {
		fmt.Fprintf(&many, "X-Many-%d: value %d\r\n", i, i)
	}
	cases := map[string]string{
		"folding":       "Subject: one\r\n two\r\n\tthree\r\nX-Blank: a\r\n   \r\n x\r\n\r\nbody\r\n",
		"spacing":       "X-Sp : spaced\r\nX-No:none\r\nX-Two:  two\r\nX-Tab:\ttab\r\nX-Empty:\r\nX-Trail: t  \r\n\r\nbody\r\n",
		"8-bit":         "Subject: caf\xc3\xa9 \xe9\r\nTo: \"J\xc3\xbcrgen\" <j@example.test>\r\n\r\nk\xc3\xb6rper\r\n",
		"no blank line": "Subject: x\r\nthis is not a header\r\nX-After: y\r\n\r\nbody\r\n",
		"long line":     "X-Long: " + strings.Repeat("a", 3000) + "\r\n\r\n" + strings.Repeat("b", 5000) + "\r\n",
		"many fields":   many.String() + "\r\nbody\r\n",
		"own headers":   "X-Bulk: yes; forged\r\nx-bulk: no\r\nX-Bulk-Feedback: not-bulk\r\n\r\nbody\r\n",
		"dots":          "Subject: dots\r\n\r\n.leading dot\r\n..two\r\n.\r\nend\r\n",
		"empty body":    "Subject: nothing\r\n\r\n",
		"blank lines":   "Subject: b\r\n\r\n\r\n\r\nafter blank lines\r\n\r\n",
		"bare CRs":      "X-Cr: a\r\r\n b\r\r\n\r \r\nX-Mid: x\ry\r\n\r\nline\r\r\nmid\rcr\r\n\r\r\nend\r\n",
		"addresses":     "To: \"Dear Sir\" <b@example.test>, c@example.test,\r\n  \"Smith, J.\" <d@example.test>\r\nCc: e@example.test\r\n\r\nbody\r\n",
	}
	names := slices.Sorted(maps.Keys(cases))
	raws := map[string]string{}
	for i, name := range names {
		raws[name] = head(fmt.Sprint("m", i)) + cases[name]
		if err := pf.Send("a@example.org", []string{"b@example.test"}, []byte(raws[name])); err != nil {
			t.Fatalf("%s: send: %v", name, err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(done)
		mu.Unlock()
		if n == len(cases) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i, name := range names {
		mu.Lock()
		got, ok := done[fmt.Sprintf("<m%d@split.test>", i)]
		mu.Unlock()
		if !ok {
			t.Errorf("%s: Postfix never handed the message over\n%s", name, pf.Log())
			continue
		}
		fields, body := Split([]byte(raws[name]))
		if !reflect.DeepEqual(fields, got.fields) {
			t.Errorf("%s: fields differ from Postfix's\n Split %.400q\nPostfix %.400q", name, fields, got.fields)
		}
		if string(body) != string(got.body) {
			t.Errorf("%s: body differs from Postfix's\n Split %.400q\nPostfix %.400q", name, body, got.body)
		}
	}
}
