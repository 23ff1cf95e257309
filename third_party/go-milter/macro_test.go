package milter

import (
	"strings"
	"testing"

	"github.com/d--j/go-milter/internal/wire"
)

// upstreamStage is how upstream stored a macro packet's data: DecodeCStrings,
// an empty value for an odd count, a map in which the last of a name wins.
func upstreamStage(data string) map[string]string {
	kv := wire.DecodeCStrings([]byte(data))
	if len(kv) == 0 {
		return nil
	}
	if len(kv)%2 == 1 {
		kv = append(kv, "")
	}
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// checkStage fails unless every name of data, and a few others, is found
// (or not) as upstream's map has it.
func checkStage(t *testing.T, data string) {
	t.Helper()
	want := upstreamStage(data)
	var s macrosStages
	s.SetStage(StageMail, []byte(data))
	r := &macroReader{macrosStages: &s}
	names := append(strings.Split(data, "\x00"), "", "i", "{mail_addr}", "absent")
	for _, n := range names {
		w, wok := want[n]
		if got, ok := r.GetEx(n); got != w || ok != wok {
			t.Fatalf("data %q: GetEx(%q) = %q %v, upstream's %q %v", data, n, got, ok, w, wok)
		}
	}
}

// TestMacroStages (bulkmilter patch 6): a stage kept as the MTA sent it
// answers as upstream's map did; stages shadow earlier ones and are deleted
// with the stages above them.
func TestMacroStages(t *testing.T) {
	for _, data := range []string{"", "\x00", "\x00\x00", "i\x00Q1\x00", "i\x00Q1", "i\x00", "i",
		"i\x00Q1\x00{mail_addr}\x00a@b\x00", "i\x00one\x00i\x00two\x00", "\x00v\x00", "a\x00\x00b\x00c\x00", "i\x00Q1\x00\x00"} {
		checkStage(t, data)
	}
	var s macrosStages
	r := &macroReader{macrosStages: &s}
	s.SetStage(StageConnect, []byte("{client_addr}\x00192.0.2.1\x00j\x00mx\x00"))
	s.SetStage(StageMail, []byte("{client_addr}\x00198.51.100.7\x00"))
	if v := r.Get(MacroClientAddr); v != "198.51.100.7" {
		t.Errorf("the later stage's value: got %q", v)
	}
	s.DelStageAndAbove(StageHelo)
	if v := r.Get(MacroClientAddr); v != "192.0.2.1" {
		t.Errorf("after the later stages' deletion: got %q", v)
	}
	if v, ok := r.GetEx("{auth_authen}"); ok || v != "" {
		t.Errorf("an absent macro: got %q %v", v, ok)
	}
	s.DelStageAndAbove(StageConnect)
	if v, ok := r.GetEx("j"); ok {
		t.Errorf("all stages deleted: got %q", v)
	}
}

// TestMacroStagesExhaustive: every stage data of up to 7 bytes of 'a', 'b'
// and NUL (the fork's tests are not fuzzed: scripts/fuzz.sh runs the main
// module's targets).
func TestMacroStagesExhaustive(t *testing.T) {
	datas := []string{""}
	for l := 1; l <= 7; l++ {
		for _, d := range datas {
			if len(d) == l-1 {
				for _, c := range []string{"a", "b", "\x00"} {
					datas = append(datas, d+c)
				}
			}
		}
	}
	for _, d := range datas {
		checkStage(t, d)
	}
	t.Logf("%d stage datas", len(datas))
}

// TestMacroStagesReuse (bulkmilter patch 8): a stage's buffer is reused
// from packet to packet without allocating, and a value asked for is a
// copy that the next packet does not change.
func TestMacroStagesReuse(t *testing.T) {
	var s macrosStages
	r := &macroReader{macrosStages: &s}
	pkt := []byte("i\x00Q1\x00")
	s.SetStage(StageEOM, pkt)
	q := r.Get(MacroQueueId)
	pkt[3] = '2' // the packet's buffer is the connection's, reused
	s.SetStage(StageEOM, []byte("i\x00Q3\x00"))
	if q != "Q1" || r.Get(MacroQueueId) != "Q3" {
		t.Errorf("values %q then %q, want Q1 then Q3", q, r.Get(MacroQueueId))
	}
	if n := testing.AllocsPerRun(100, func() {
		s.DelStageAndAbove(StageEOM)
		s.SetStage(StageEOM, pkt)
	}); n != 0 {
		t.Errorf("setting a stage allocates %.0f objects", n)
	}
}
