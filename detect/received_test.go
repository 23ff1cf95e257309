package detect

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-message/textproto"
)

func TestParseReceived(t *testing.T) {
	edt := time.FixedZone("", -4*3600)
	for _, c := range []struct {
		name, v string
		client  string // "" for none
		rcpt    string
		at      time.Time
	}{
		{"sendmail, HELO an address", "from 129.97.78.23 ([211.202.101.74])\n\tby speedy.uwaterloo.ca (8.12.8/8.12.5) with SMTP id l38H7G0I003017;\n\tSun, 8 Apr 2007 13:07:21 -0400",
			"211.202.101.74", "", time.Date(2007, 4, 8, 13, 7, 21, 0, edt)},
		{"sendmail, for clause", "from murphy.debian.org (murphy.debian.org [70.103.162.31])\n\tby speedy.uwaterloo.ca (8.12.8/8.12.5) with ESMTP id l38H9S0I003031\n\tfor <ktwarwic@speedy.uwaterloo.ca>; Sun, 8 Apr 2007 13:09:28 -0400",
			"70.103.162.31", "ktwarwic@speedy.uwaterloo.ca", time.Date(2007, 4, 8, 13, 9, 28, 0, edt)},
		{"HELO an address literal", "from [192.168.0.101] (bas6-montreal28-1177925679.dsl.bell.ca [70.53.184.47]) by x.example", "70.53.184.47", "", time.Time{}},
		{"postfix", "from mail.example.org (mail.example.org [2001:db8::25])\r\n\tby mx.example.net (Postfix) with ESMTPS id 4XyZ for <u@example.net>; Thu, 26 Nov 2026 10:00:00 +0000 (UTC)",
			"2001:db8::25", "u@example.net", time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)},
		{"sendmail IPv6", "from h.example (h.example [IPv6:2001:db8::7]) by mx", "2001:db8::7", "", time.Time{}},
		{"exim without rDNS", "from [198.51.100.9] (helo=x) by mx.example with esmtp (Exim 4.96)", "198.51.100.9", "", time.Time{}},
		{"exim with rDNS", "from h.example ([198.51.100.9] helo=x) by mx.example with esmtp", "198.51.100.9", "", time.Time{}},
		{"qmail", "from unknown (HELO h.example) (198.51.100.10)\n  by mx.example with SMTP; 8 Apr 2007 17:00:00 -0000", "198.51.100.10", "", time.Date(2007, 4, 8, 17, 0, 0, 0, time.UTC)},
		{"mapped IPv4", "from h ([IPv6:::ffff:192.0.2.3]) by mx", "192.0.2.3", "", time.Time{}},
		{"HELO a bare address only", "from 192.0.2.4 by mx", "", "", time.Time{}},
		{"no from clause", "by lists.samba.org (Postfix, from userid 540)\n\tid 98EB8162AEC; Sun, 22 Apr 2007 22:10:38 +0000 (GMT)", "", "", time.Date(2007, 4, 22, 22, 10, 38, 0, time.UTC)},
		{"address in the by clause", "from h (h [not-an-address]) by mx ([192.0.2.5])", "", "", time.Time{}},
		{"for without brackets", "from a ([192.0.2.6]) by mx id 1 for u@example.net", "192.0.2.6", "u@example.net", time.Time{}},
		{"empty", "", "", "", time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := ParseReceived(c.v)
			var want netip.Addr
			if c.client != "" {
				want = netip.MustParseAddr(c.client)
			}
			if r.Client != want || r.For != c.rcpt || !r.Time.Equal(c.at) {
				t.Errorf("got %v %q %v, want %v %q %v", r.Client, r.For, r.Time, want, c.rcpt, c.at)
			}
		})
	}
}

func TestReceivedEnvelope(t *testing.T) {
	h := built("Return-Path: <Sender@Example.org>\n" +
		"Received: from localhost (localhost [127.0.0.1]) by mx.example.net (amavis) for <a@example.net>\n" +
		"Received: from relay.example (relay.example [198.51.100.1]) by mx.example.net\n" +
		"Received: from evil (evil [203.0.113.66]) by forged.example for <victim@example.org>\n" +
		"To: Someone <list@lists.example>\n")
	if a, ok := ReceivedClient(h); !ok || a != netip.MustParseAddr("198.51.100.1") {
		t.Errorf("client %v %v, want 198.51.100.1 (the topmost, loopback skipped)", a, ok)
	}
	if got := HeaderRecipients(h); !slices.Equal(got, []string{"a@example.net"}) {
		t.Errorf("recipients %q, want the top for clause", got)
	}
	if got := ReturnPath(h); got != "sender@example.org" {
		t.Errorf("sender %q", got)
	}

	g := built("Delivered-To: bob@example.net\nDelivered-To: list@example.net\n" +
		"Received: by mx.example.net (Postfix, from userid 1)\n" +
		"Received: from a (a [198.51.100.2]) by mx for <forged@example.net>\n" +
		"To: x@example.org\n")
	if got := HeaderRecipients(g); !slices.Equal(got, []string{"bob@example.net"}) {
		t.Errorf("recipients %q, want Delivered-To (a lower for clause is the sender's)", got)
	}
	k := built("To: A <a@example.org>,\n b@example.org\nCc: c@example.org\nReturn-Path: <>\n")
	if got := HeaderRecipients(k); !slices.Equal(got, []string{"a@example.org", "b@example.org", "c@example.org"}) {
		t.Errorf("recipients %q, want To and Cc", got)
	}
	if got := ReturnPath(k); got != "" {
		t.Errorf("null sender %q", got)
	}
	if _, ok := ReceivedClient(k); ok {
		t.Error("a client without a Received field")
	}
}

// TestDateTime: a replay counts a message at its Date unless the Date is
// later than the site's Received date (a forged future Date, which put the
// message in a store bucket ahead of every other one), then at the
// Received date; an unparsable Date is no time.
func TestDateTime(t *testing.T) {
	const rcvd = "Received: from h ([192.0.2.1]) by mx for <u@example.net>; Sun, 8 Apr 2007 13:07:21 -0400\n"
	at := time.Date(2007, 4, 8, 17, 7, 21, 0, time.UTC)
	for _, c := range []struct {
		name, header string
		want         time.Time // zero: ok false
	}{
		{"date before delivery", rcvd + "Date: Sun, 8 Apr 2007 12:00:00 -0400\n", time.Date(2007, 4, 8, 16, 0, 0, 0, time.UTC)},
		{"date at delivery", rcvd + "Date: Sun, 8 Apr 2007 17:07:21 +0000\n", at},
		{"date in the past", rcvd + "Date: Mon, 1 Jan 1990 00:00:00 +0000\n", time.Date(1990, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"date a few hours ahead", rcvd + "Date: Sun, 8 Apr 2007 23:00:00 -0400\n", at},
		{"date in 2090", rcvd + "Date: Mon, 23 Jan 2090 00:51:04 +0000\n", at},
		{"future date without a Received date", "Received: from h ([192.0.2.1]) by mx\nDate: Mon, 23 Jan 2090 00:51:04 +0000\n", time.Date(2090, 1, 23, 0, 51, 4, 0, time.UTC)},
		{"no Received field", "Date: Sun, 8 Apr 2007 23:00:00 -0400\n", time.Date(2007, 4, 9, 3, 0, 0, 0, time.UTC)},
		{"unparsable date", rcvd + "Date: yesterday\n", time.Time{}},
		{"no date", rcvd, time.Time{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := DateTime(built(c.header + "Subject: x"))
			if ok != !c.want.IsZero() || !got.Equal(c.want) {
				t.Errorf("got %v, %v; want %v, %v", got, ok, c.want, !c.want.IsZero())
			}
		})
	}
}

// built takes a header in through a Builder, as every replay does (the
// fields' order is the Builder's).
func built(header string) textproto.Header {
	b := NewBuilder(DefaultLimits, "X-Bulk", "X-Bulk-Feedback")
	b.ReadRaw([]byte(header + "\nbody\n"))
	return b.Message().Header
}

// FuzzParseReceived: any value gives a usable answer, never a panic: a
// valid client without zone or mapping, a recipient without blanks.
func FuzzParseReceived(f *testing.F) {
	for _, s := range []string{
		"from 129.97.78.23 ([211.202.101.74])\n\tby speedy.uwaterloo.ca (8.12.8/8.12.5) with SMTP id l38H7G0I003017;\n\tSun, 8 Apr 2007 13:07:21 -0400",
		"from h (h [IPv6:2001:db8::7]) by mx for <u@example.net>; Thu, 26 Nov 2026 10:00:00 +0000",
		"from ((([", "for", "from [", ";;;", "from unknown (HELO h) (1.2.3.4) by x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r := ParseReceived(s)
		if r.Client.IsValid() && (r.Client.Zone() != "" || r.Client.Is4In6()) {
			t.Fatalf("client %v", r.Client)
		}
		for _, c := range r.For {
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				t.Fatalf("recipient %q", r.For)
			}
		}
	})
}

// TestRelayedClient: from a site's relay, the client is the first outside
// one the Received fields name top down, fields further down never read;
// from any other client, or when no field names an outside client, the
// SMTP client.
func TestRelayedClient(t *testing.T) {
	relays := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:25::/48")}
	const (
		mine   = "Received: from relay.example (relay.example [192.0.2.25]) by mx.example.net for <u@example.net>\n"
		relay  = "Received: from bot.example (bot.example [198.51.100.7]) by relay.example for <old@relay.example>\n"
		forged = "Received: from evil (evil [203.0.113.66]) by forged.example\n"
	)
	for _, c := range []struct {
		name, header, client string
		want                 string
	}{
		{"the relay's field under the site's own", mine + relay + forged, "192.0.2.25", "198.51.100.7"},
		{"the relay's field on top (the MTA shows its own to no milter)", relay + forged, "192.0.2.25", "198.51.100.7"},
		{"two relays, a loopback hop", mine + "Received: from localhost (localhost [127.0.0.1]) by relay.example\n" +
			"Received: from gw (gw [192.0.2.80]) by relay.example\n" + relay + forged, "192.0.2.25", "198.51.100.7"},
		{"IPv6 relay", "Received: from r (r [IPv6:2001:db8:25::1]) by mx\n" + relay, "2001:db8:25::1", "198.51.100.7"},
		{"no relay: the header is not read", relay + forged, "198.51.100.9", "198.51.100.9"},
		{"no outside client named", mine + "Received: by relay.example (Postfix, from userid 1)\n", "192.0.2.25", "192.0.2.25"},
		{"no Received field", "", "192.0.2.25", "192.0.2.25"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := RelayedClient(built(c.header+"Subject: x\n"), netip.MustParseAddr(c.client), relays)
			if want := netip.MustParseAddr(c.want); got != want {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
	h := built(relay + "Subject: x\n")
	if got := RelayedClient(h, netip.MustParseAddr("192.0.2.25"), nil); got != netip.MustParseAddr("192.0.2.25") {
		t.Errorf("no relays configured: got %v, want the SMTP client", got)
	}
	var b strings.Builder
	for range maxRelayHops {
		b.WriteString("Received: from gw (gw [192.0.2.80]) by relay.example\n")
	}
	if got := RelayedClient(built(b.String()+relay+"Subject: x\n"), netip.MustParseAddr("192.0.2.25"), relays); got != netip.MustParseAddr("192.0.2.25") {
		t.Errorf("past %d relay hops: got %v, want the SMTP client", maxRelayHops, got)
	}
}

// FuzzRelayedClient: any header gives the SMTP client or an outside
// client one of its Received fields names, never a relay, never a panic.
func FuzzRelayedClient(f *testing.F) {
	f.Add("Received: from relay (relay [192.0.2.25]) by mx\nReceived: from b (b [198.51.100.7]) by relay\n")
	f.Add("Received: from ((([\nReceived: from [192.0.2.1]\n")
	relays := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
	client := netip.MustParseAddr("192.0.2.25")
	f.Fuzz(func(t *testing.T, header string) {
		got := RelayedClient(built(header+"\nSubject: x\n"), client, relays)
		if got != client && (!got.IsValid() || got.IsLoopback() || relays[0].Contains(got)) {
			t.Fatalf("client %v", got)
		}
	})
}
