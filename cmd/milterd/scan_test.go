package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// campaignMbox writes an mbox of n copies of one newsletter, each to its
// own addressee, followed by two unrelated messages.
func campaignMbox(t *testing.T, n int) string {
	t.Helper()
	var b strings.Builder
	body := `Our spring catalogue is out: garden furniture, outdoor lighting and
barbecue equipment at prices that will surprise you. Every order above
fifty pounds ships free of charge anywhere in the country, and returns
are free for thirty days. Visit one of our stores this weekend to see
the new collection, meet our designers and enjoy a cup of coffee on us.
Members of the loyalty club receive an extra ten percent discount on
every purchase until the end of the month.`
	for i := range n {
		fmt.Fprintf(&b, "From sender@shop.example Mon Apr  1 10:00:00 2024\nFrom: shop@shop.example\nTo: Customer %d <customer%d@example.net>\nSubject: Spring catalogue\nMessage-ID: <c%d@shop.example>\n\n%s\n\n", i, i, i, body)
	}
	fmt.Fprintf(&b, "From a@example.org Mon Apr  1 10:00:00 2024\nFrom: a@example.org\nTo: b@example.org\nSubject: lunch\n\nShall we meet for lunch tomorrow at noon near the station?\n\n")
	fmt.Fprintf(&b, "From c@example.org Mon Apr  1 10:00:00 2024\nFrom: c@example.org\nTo: d@example.org\nSubject: report\n\nThe quarterly report is attached; comments welcome before Friday.\n")
	path := filepath.Join(t.TempDir(), "in.mbox")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type scanOut struct {
	records []scanRecord
	summary scanSummary
}

func runScan(t *testing.T, args ...string) scanOut {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := mainExit(append([]string{"scan"}, args...), &stdout, &stderr); code != 0 {
		t.Fatalf("milterd scan %v: exit %d\n%s", args, code, stderr.String())
	}
	var out scanOut
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte(`{"summary"`)) {
			if err := json.Unmarshal(line, &out.summary); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var r scanRecord
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		out.records = append(out.records, r)
	}
	return out
}

func TestScanSynthesisedRecipients(t *testing.T) {
	// The default data directory must stay untouched: point every place it
	// could be at an empty directory and check it stays empty.
	state := t.TempDir()
	t.Setenv("STATE_DIRECTORY", state)
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("HOME", state)

	out := runScan(t, "-q", campaignMbox(t, 12))
	if len(out.records) != 14 {
		t.Fatalf("%d records, want 14", len(out.records))
	}
	for i, r := range out.records {
		wantBulk := i >= 9 && i < 12 // copies 10, 11 and 12 reach the threshold
		if r.Bulk != wantBulk {
			t.Errorf("message %d (%s): bulk %v, want %v (%s)", r.N, r.Name, r.Bulk, wantBulk, r.Verdict)
		}
		if r.N != i+1 || r.Recipients != 1 || !strings.HasPrefix(r.Verdict, map[bool]string{true: "yes", false: "no"}[r.Bulk]) {
			t.Errorf("record %d: %+v", i, r)
		}
	}
	first := out.records[0]
	if first.Subject != "Spring catalogue" || first.MessageID != "<c0@shop.example>" || first.Name != "in.mbox#1" {
		t.Errorf("first record %+v", first)
	}
	if len(first.Keys) == 0 || len(first.Volumes) == 0 {
		t.Errorf("first record lacks keys or volumes: %+v", first)
	}
	if v := out.records[11].Volume; v != 12 {
		t.Errorf("12th copy: volume %d, want 12", v)
	}
	if lunch := out.records[12]; len(lunch.Declined) == 0 {
		t.Errorf("a one-line message: no family declined: %+v", lunch)
	}
	s := out.summary.Summary
	if s.Messages != 14 || s.Tagged != 3 || len(s.Clusters) == 0 || s.Clusters[0].Size != 12 || s.Clusters[0].Tagged != 3 {
		t.Errorf("summary %+v", s)
	}
	if !strings.HasPrefix(s.Store, "embedded:"+os.TempDir()) {
		t.Errorf("store %q: want a temporary embedded store", s.Store)
	}
	if entries, _ := os.ReadDir(state); len(entries) != 0 {
		t.Errorf("the scan wrote into the default state directory: %v", entries)
	}
}

func TestScanRecipientSources(t *testing.T) {
	mbox := campaignMbox(t, 12)
	// One recipient for every message: twelve copies are one recipient.
	out := runScan(t, "-q", "-rcpt", "me@example.org", mbox)
	if s := out.summary.Summary; s.Tagged != 0 {
		t.Errorf("-rcpt: %d tagged, want 0 (one recipient)", s.Tagged)
	}
	if v := out.records[11].Volume; v != 1 {
		t.Errorf("-rcpt: volume %d after 12 copies to one recipient, want 1", v)
	}
	// The To headers name a different customer each time.
	out = runScan(t, "-q", "-rcpt-from", "headers", mbox)
	if s := out.summary.Summary; s.Tagged != 3 {
		t.Errorf("-rcpt-from headers: %d tagged, want 3", s.Tagged)
	}
}

// TestScanEnvelopeFromHeaders replays a site's stored mail: the list
// address in To is the same in every copy, the site's own Received field
// names each recipient and client, Return-Path the sender, and the Date is
// forged far away from the arrival.
func TestScanEnvelopeFromHeaders(t *testing.T) {
	var b strings.Builder
	for i := range 12 {
		fmt.Fprintf(&b, "From x Mon Apr  1 10:00:00 2024\nReturn-Path: <Bounce-%d@Shop.example>\n"+
			"Received: from mx%d.shop.example (mx%d.shop.example [198.51.%d.7])\n\tby mx.example.net (8.12.8/8.12.5) with ESMTP id x%d\n\tfor <user%d@example.net>; Mon, 1 Apr 2024 10:%02d:00 +0000\n"+
			"Received: from [10.0.0.1] (forged [203.0.113.1]) by mx%d.shop.example for <someone@else.example>\n"+
			"From: shop@shop.example\nTo: list@lists.example\nDate: Mon, 1 Apr 2019 10:00:00 +0000\nSubject: Spring catalogue\n\n%s\n\n",
			i, i, i, i, i, i, i, i, strings.Repeat("Our spring catalogue is out with garden furniture and outdoor lighting at prices that will surprise you. ", 4))
	}
	path := filepath.Join(t.TempDir(), "site.mbox")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runScan(t, "-q", "-rcpt-from", "headers", "-client-from", "received", "-sender-from", "return-path", "-time", "received", path)
	if s := out.summary.Summary; s.Tagged != 3 {
		t.Errorf("%d tagged, want 3 (twelve recipients from the Received fields)", s.Tagged)
	}
	r := out.records[4]
	if r.Client != "198.51.4.7" || r.Sender != "bounce-4@shop.example" || r.Time != "2024-04-01T10:04:00Z" || r.Recipients != 1 {
		t.Errorf("fifth record: client %q sender %q time %q recipients %d", r.Client, r.Sender, r.Time, r.Recipients)
	}
	// Behind relays the configuration lists (here every mx of the shop),
	// the client counted is the one the relay wrote.
	cfg := filepath.Join(t.TempDir(), "relays.yml")
	if err := os.WriteFile(cfg, []byte("policy:\n  relays: [198.51.0.0/16]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = runScan(t, "-q", "-config", cfg, "-rcpt-from", "headers", "-client-from", "received", path)
	if r := out.records[4]; r.Client != "203.0.113.1" {
		t.Errorf("behind a relay: client %q, want 203.0.113.1", r.Client)
	}
	// Without them: no client nor sender, and the Date's time.
	out = runScan(t, "-q", "-rcpt-from", "headers", path)
	if r := out.records[4]; r.Client != "" || r.Sender != "" || r.Time != "2019-04-01T10:00:00Z" {
		t.Errorf("defaults: client %q sender %q time %q", r.Client, r.Sender, r.Time)
	}
}

func TestScanDataDir(t *testing.T) {
	dir := t.TempDir()
	runScan(t, "-q", "-data-dir", dir, campaignMbox(t, 3))
	for _, f := range []string{"secret.key", "store.db"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("-data-dir: %v", err)
		}
	}
	// Counts persist in the asked-for store: a second scan continues them.
	out := runScan(t, "-q", "-data-dir", dir, campaignMbox(t, 3))
	if v := out.records[2].Volume; v != 3 {
		t.Errorf("rescan with the same synthesised recipients: volume %d, want 3 (idempotent per recipient)", v)
	}
}

func TestScanUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"-rcpt-from", "flag", "x.mbox"}, {"-rcpt-from", "bogus", "x.mbox"}, {"-client-from", "to", "x.mbox"}, {"-sender-from", "from", "x.mbox"}, {"-time", "later", "x.mbox"}} {
		var stdout, stderr bytes.Buffer
		if code := mainExit(append([]string{"scan"}, args...), &stdout, &stderr); code != 2 {
			t.Errorf("scan %v: exit %d, want 2\n%s", args, code, stderr.String())
		}
	}
}

// TestScanTime replays copies dated two days apart: with their dates each
// is alone in the store's window; with -time now they add up.
func TestScanTime(t *testing.T) {
	var b strings.Builder
	for i := range 12 {
		d := time.Date(2024, 3, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(i) * 48 * time.Hour)
		fmt.Fprintf(&b, "From x Mon Apr  1 10:00:00 2024\nFrom: club@example.org\nTo: m%d@example.net\nDate: %s\nSubject: Club news\n\n%s\n\n",
			i, d.Format(time.RFC1123Z), strings.Repeat("The chess club meets on Tuesday evenings in the library; new players are welcome and boards are provided. ", 4))
	}
	path := filepath.Join(t.TempDir(), "dated.mbox")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	dated := runScan(t, "-q", path)
	if s := dated.summary.Summary; s.Tagged != 0 {
		t.Errorf("-time date: %d tagged, want 0 (each copy alone in its window)", s.Tagged)
	}
	if got := dated.records[3].Time; got != "2024-03-07T09:00:00Z" {
		t.Errorf("fourth message's time %q", got)
	}
	now := runScan(t, "-q", "-time", "now", path)
	if s := now.summary.Summary; s.Tagged != 3 {
		t.Errorf("-time now: %d tagged, want 3", s.Tagged)
	}
}
