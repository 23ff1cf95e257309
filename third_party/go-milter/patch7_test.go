package milter

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/d--j/go-milter/internal/wire"
)

// TestNegotiateAndHeaderData (bulkmilter patch 7): the negotiation reply
// and the header modifications are upstream's bytes, built in one buffer.
func TestNegotiateAndHeaderData(t *testing.T) {
	req := macroRequests{{"j", "{client_addr}"}, nil, {"{auth_authen}"}, {}, {"i", "{rcpt_addr}", "x"}}
	neg := make([]byte, 12)
	binary.BigEndian.PutUint32(neg, 6)
	binary.BigEndian.PutUint32(neg[4:], uint32(AllClientSupportedActionMasks))
	binary.BigEndian.PutUint32(neg[8:], 0xffffff)
	var s serverSession
	resp, err := s.negotiate(&wire.Message{Code: wire.CodeOptNeg, Data: neg}, 6, OptAddHeader|OptChangeHeader, OptNoConnReply, nil, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Upstream's construction.
	var want bytes.Buffer
	for _, v := range []uint32{6, uint32(OptAddHeader | OptChangeHeader), uint32(OptNoConnReply)} {
		want.Write([]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	for st, names := range req {
		if len(names) > 0 {
			want.Write([]byte{0, 0, 0, byte(st)})
			want.WriteString(strings.Join(names, " "))
			want.WriteByte(0)
		}
	}
	if got := resp.Response(); got.Code != wire.CodeOptNeg || !bytes.Equal(got.Data, want.Bytes()) {
		t.Errorf("negotiation reply %c %q, upstream's %q", got.Code, got.Data, want.Bytes())
	}

	var sent []*wire.Message
	m := &modifier{state: modifierStateReadWrite, actions: OptAddHeader | OptChangeHeader,
		writePacket: func(code wire.Code, data []byte) error {
			sent = append(sent, &wire.Message{Code: code, Data: data})
			return nil
		}}
	if err := m.AddHeader("X-Bulk", "yes;\r\n family=x"); err != nil {
		t.Fatal(err)
	}
	if err := m.ChangeHeader(258, "Subject", "[bulk] hi"); err != nil {
		t.Fatal(err)
	}
	for i, w := range []struct {
		code wire.Code
		data string
	}{{wire.Code(wire.ActAddHeader), "X-Bulk\x00yes;\n family=x\x00"}, {wire.Code(wire.ActChangeHeader), "\x00\x00\x01\x02Subject\x00[bulk] hi\x00"}} {
		if i >= len(sent) || sent[i].Code != w.code || string(sent[i].Data) != w.data {
			t.Errorf("modification %d: got %+v, want %c %q", i, sent, w.code, w.data)
		}
	}
}
