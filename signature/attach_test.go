package signature

import (
	"strings"
	"testing"
)

// part is a non-image part of size bytes that starts with s.
func part(s string, size int) Attachment {
	b := make([]byte, max(size, len(s)))
	copy(b, s)
	return Attachment{Data: b}
}

func TestAttachSign(t *testing.T) {
	a, err := NewAttach(testSecret(t), AttachParams{Enabled: true, MinBytes: 100, MaxKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewAttach(secretN(t, 77), AttachParams{Enabled: true, MinBytes: 100, MaxKeys: 2})
	img, logo, pdf, other := part("image", 5000), part("spacer", 43), part("pdf", 20000), part("third", 900)
	for _, tc := range []struct {
		name     string
		parts    []Attachment
		keys     int
		declined string
	}{
		{"none", nil, 0, "no attachment"},
		{"one", []Attachment{img}, 1, ""},
		{"twice the same", []Attachment{img, img}, 1, ""},
		{"small left out", []Attachment{logo, img}, 1, ""},
		{"only small", []Attachment{logo}, 0, "every attachment under 100 bytes"},
		{"capped", []Attachment{img, pdf, other}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, e := a.Sign(&Doc{Attachments: tc.parts}, nil)
			if len(keys) != tc.keys || e.Keys != tc.keys || e.Declined != tc.declined {
				t.Fatalf("got %d keys, explain %+v; want %d, declined %q", len(keys), e, tc.keys, tc.declined)
			}
			other, _ := b.Sign(&Doc{Attachments: tc.parts}, nil)
			for i, k := range keys {
				if k.Family != FamilyAttach || k.Index != 0 {
					t.Errorf("got key %v, want family attach, index 0", k)
				}
				if k == other[i] {
					t.Errorf("key %v the same under two secrets", k)
				}
			}
		})
	}
	// The same part in another message is the same key.
	k1, _ := a.Sign(&Doc{Attachments: []Attachment{pdf, img}}, nil)
	k2, _ := a.Sign(&Doc{Tokens: []string{"other", "text"}, Attachments: []Attachment{img}}, nil)
	if k1[1] != k2[0] {
		t.Errorf("the same image gave keys %v and %v", k1[1], k2[0])
	}
	// The key of a fixed digest under the test secret: a change here
	// changes stored keys and needs an AlgorithmVersion bump.
	if got := k2[0].String(); got != goldenAttachKey {
		t.Errorf("got key %s, want %s (bump AlgorithmVersion if the change is deliberate)", got, goldenAttachKey)
	}
}

// goldenAttachKey is the key of part("image", 5000) under testSecret.
const goldenAttachKey = "attach.0:cffaccf9211c6517"

// The Set signs a message's parts only when no other family signed it,
// unless WithText.
func TestSetAttachOnlyUnsigned(t *testing.T) {
	img := part("image", 5000)
	imageOnly := &Doc{Attachments: []Attachment{img}}
	text := textDoc(strings.Repeat("The quarterly newsletter of our society, with the meeting agenda and the minutes. ", 10))
	text.Attachments = []Attachment{img}
	for _, withText := range []bool{false, true} {
		s := fixtureSetWith(t, func(p *SetParams) { p.Attach.WithText = withText })
		keys, exps := s.Sign(imageOnly, nil, nil)
		if len(keys) != 1 || keys[0].Family != FamilyAttach || explainOf(exps, FamilyAttach).Keys != 1 {
			t.Errorf("with_text=%v: image only: got keys %v, explain %+v; want one attach key", withText, keys, explainOf(exps, FamilyAttach))
		}
		keys, exps = s.Sign(text, nil, nil)
		n := 0
		for _, k := range keys {
			if k.Family == FamilyAttach {
				n++
			}
		}
		// The part is the message's only one, so SoleImage (a default)
		// looks for an offer-sized image in it, and finds none.
		want, declined := 0, "the text is signed, and no image is an offer's size"
		if withText {
			want, declined = 1, ""
		}
		last := explainOf(exps, FamilyAttach)
		if n != want || len(keys) == n || last.Family != FamilyAttach || last.Declined != declined {
			t.Errorf("with_text=%v: text and image: got %d attach keys of %d, explain %+v; want %d, declined %q", withText, n, len(keys), last, want, declined)
		}
		if withText && keys[len(keys)-1].Family != FamilyAttach {
			t.Errorf("with_text: got %v last, want the attach key last", keys[len(keys)-1])
		}
	}
}

func TestAttachParamsValidate(t *testing.T) {
	for _, p := range []AttachParams{{MinBytes: -1, MaxKeys: 4}, {MaxKeys: 0}, {MaxKeys: maxAttachKeys + 1}} {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if err := DefaultAttachParams().Validate(); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}

// The remote-image key: one key over the set of a message's remote image
// paths, for a message nothing else signs; the same set in another order
// or repeated is the same key, a set that differs in one image another.
func TestSetRemoteImages(t *testing.T) {
	s := fixtureSet(t)
	off := fixtureSetWith(t, func(p *SetParams) { p.Attach.Remote = false })
	offer := []string{"/i/w5ungx/1amplv8u/lafar_5939/komun_1.jpg", "/i/w5ungx/1amplv8u/lafar_5939/komun_2.jpg"}
	remote := func(s *Set, d *Doc) (keys []Key, e Explain) {
		t.Helper()
		keys, exps := s.Sign(d, nil, nil)
		var out []Key
		for _, k := range keys {
			if k.Family == FamilyAttach && k.Index == remoteIndex {
				out = append(out, k)
			}
		}
		return out, explainOf(exps, FamilyAttach)
	}
	base, e := remote(s, &Doc{Tokens: []string{"claim", "now"}, Images: offer})
	if len(base) != 1 || e.Keys != 1 || e.Detail != "remote images=2" {
		t.Fatalf("image-only offer: got %v, explain %+v; want one remote key", base, e)
	}
	text := textDoc(strings.Repeat("The quarterly newsletter of our society, with the meeting agenda and the minutes. ", 10))
	for _, tc := range []struct {
		name string
		set  *Set
		doc  *Doc
		want string // "same": the offer's key; "other": another remote key; "none"
	}{
		{"reordered and repeated", s, &Doc{Images: []string{offer[1], offer[0], offer[1]}}, "same"},
		{"one image more", s, &Doc{Images: append([]string{"/logo.png"}, offer...)}, "other"},
		{"one image fewer", s, &Doc{Images: offer[:1]}, "other"},
		{"signed text", s, &Doc{Tokens: text.Tokens, Letters: text.Letters, Images: offer}, "none"},
		{"signed attachment", s, &Doc{Attachments: []Attachment{part("image", 5000)}, Images: offer}, "none"},
		{"off", off, &Doc{Images: offer}, "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := remote(tc.set, tc.doc)
			ok := false
			switch tc.want {
			case "same":
				ok = len(got) == 1 && got[0] == base[0]
			case "other":
				ok = len(got) == 1 && got[0] != base[0]
			case "none":
				ok = len(got) == 0
			}
			if !ok {
				t.Errorf("got %v (the offer's: %v), want %s", got, base, tc.want)
			}
		})
	}
}

// explainOf returns the Explain of family f in exps.
func explainOf(exps []Explain, f Family) Explain {
	for _, e := range exps {
		if e.Family == f {
			return e
		}
	}
	return Explain{}
}
