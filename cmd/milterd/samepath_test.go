package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/daemon"
	"github.com/bulkmilter/bulkmilter/internal/cli"
	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
)

// samePathMessages are raw messages on which header and body parsers tend
// to disagree.
func samePathMessages() map[string]string {
	body := "Our autumn catalogue is out: garden furniture, outdoor lighting and barbecue\n" +
		"equipment at prices that will surprise you. Every order above fifty pounds ships\n" +
		"free of charge anywhere in the country, and returns are free for thirty days.\n" +
		"Visit one of our stores this weekend to see the new collection and meet our designers.\n"
	head := "From: Garden Shop <shop@garden.example>\nMessage-ID: <%s@garden.example>\n"
	var many strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&many, "X-Filler-%d: %d\n", i, i)
	}
	var b64 strings.Builder
	enc := "PGh0bWw+PGJvZHk+PHA+T3VyIGF1dHVtbiBjYXRhbG9ndWUgaXMgb3V0OiBnYXJkZW4gZnVybml0dXJlLCBvdXRkb29yIGxpZ2h0aW5nIGFuZCBiYXJiZWN1ZSBlcXVpcG1lbnQgYXQgcHJpY2VzIHRoYXQgd2lsbCBzdXJwcmlzZSB5b3UuIEV2ZXJ5IG9yZGVyIGFib3ZlIGZpZnR5IHBvdW5kcyBzaGlwcyBmcmVlIG9mIGNoYXJnZS48L3A+PC9ib2R5PjwvaHRtbD4="
	for len(enc) > 76 {
		b64.WriteString(enc[:76] + "\n")
		enc = enc[76:]
	}
	b64.WriteString(enc + "\n")
	return map[string]string{
		"folded, CRLF":   strings.ReplaceAll(fmt.Sprintf(head, "crlf")+"To: \"Anna\n Ivanova\" <%[1]s>\nSubject: Autumn\n catalogue\n\tfor you, Anna\n\nDear Anna,\n"+body, "\n", "\r\n"),
		"folded, LF":     fmt.Sprintf(head, "lf") + "To: \"Anna\n Ivanova\" <%[1]s>\nSubject: Autumn\n catalogue\n\tfor you, Anna\n\nDear Anna,\n" + body,
		"long field":     fmt.Sprintf(head, "long") + "To: " + strings.Repeat("someone@else.example, ", 2000) + "<%[1]s>\nSubject: Autumn catalogue\n\n" + body,
		"many fields":    fmt.Sprintf(head, "many") + many.String() + "Subject: Autumn catalogue, late\n\n" + body,
		"8-bit":          fmt.Sprintf(head, "8bit") + "To: %[1]s\nSubject: Herbstkatalog f\xfcr Gartenm\xf6bel\nContent-Type: text/plain\n\nUnser Herbstkatalog ist da: Gartenm\xf6bel, Beleuchtung und Grillzubeh\xf6r zu Preisen, die Sie \xfcberraschen werden.\n" + body,
		"no blank line":  fmt.Sprintf(head, "noblank") + "To: %[1]s\nSubject: Autumn catalogue\n" + body,
		"mbox From line": "From shop@garden.example Mon Apr  1 10:00:00 2024\n" + fmt.Sprintf(head, "mbox") + "To: %[1]s\nSubject: Autumn catalogue\n\n" + body,
		"own headers":    fmt.Sprintf(head, "own") + "X-Bulk: no; forged\nTo: %[1]s\nx-bulk : no\nX-Bulk-Feedback: not-bulk\nSubject: Autumn catalogue\n\n" + body,
		"base64 html":    fmt.Sprintf(head, "b64") + "To: %[1]s\nSubject: =?utf-8?q?Autumn_catalogue_=E2=80=93_new?=\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=\"alt\"\n\n--alt\nContent-Type: text/plain\n\n" + body + "\n--alt\nContent-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: base64\n\n" + b64.String() + "--alt--\n",
		"large body":     fmt.Sprintf(head, "large") + "To: %[1]s\nSubject: Autumn catalogue\n\n" + strings.Repeat(body, 60_000),
	}
}

// The same raw message through the real daemon's milter session (driven
// by go-milter's client as Postfix drives it) and through scan's replay
// gets the same keys, volumes and verdict: offline runs the bytes online
// runs through the same code. Each message goes to two recipients in turn,
// so that the volumes and, at threshold 2, the verdicts differ from one
// copy to the next; the header with reveal_keys shows every key.
func TestSamePathOnlineAndOffline(t *testing.T) {
	cfgText := "actions:\n  reveal_keys: true\npolicy:\n  threshold: 2\n"
	d := startDaemonConfig(t, cfgText)
	cfgFile := filepath.Join(t.TempDir(), "offline.yml")
	writeFile(t, cfgFile, cfgText+"secret_key_file: "+filepath.Join(d.dataDir, "secret.key")+"\ndata_dir: "+t.TempDir()+"\n")
	cfg, err := cli.LoadOrDefault(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := daemon.NewRuntime(cfg, discardLogger, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()

	cl := mtaclient.New("tcp", d.milterAddr)
	for name, tmpl := range samePathMessages() {
		for copy, rcpt := range []string{"anna.ivanova@example.test", "boris.petrov@example.test"} {
			raw := []byte(fmt.Sprintf(tmpl, rcpt))
			res, err := cl.Send(mtaclient.Envelope{From: "shop@garden.example", Rcpts: []string{rcpt}}, raw)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			online := verdictOf(t, res)
			offline := rt.Check(context.Background(), raw, []string{rcpt}, time.Time{}).Header(true)
			// "; slow" says how long the analysis took on this machine
			// at this moment, not what was decided.
			online, offline = strings.Replace(online, "; slow", "", 1), strings.Replace(offline, "; slow", "", 1)
			if online != offline {
				t.Errorf("%s, copy %d:\n online %s\noffline %s", name, copy+1, online, offline)
			}
			if !strings.Contains(online, "keys=") && !strings.Contains(online, "unsigned") {
				t.Errorf("%s: no keys revealed: %s", name, online)
			}
		}
	}
}
