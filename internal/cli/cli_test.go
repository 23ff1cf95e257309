package cli

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestProgramMain(t *testing.T) {
	var ran []string
	cmd := func(name string, err error) Command {
		return Command{Name: name, Summary: "the " + name + " command", Run: func(args []string, stdout, stderr io.Writer) error {
			ran = append(ran, name+" "+strings.Join(args, " "))
			return err
		}}
	}
	p := Program{Name: "prog", Default: "run", Commands: []Command{
		cmd("run", nil), cmd("fail", errors.New("boom")), cmd("misuse", ErrUsage),
	}}
	tests := []struct {
		args       []string
		code       int
		ran        string // "" when no command ran
		out, errIn string
	}{
		{args: nil, code: 0, ran: "run "},
		{args: []string{"-config", "x"}, code: 0, ran: "run -config x"},
		{args: []string{"run", "-v"}, code: 0, ran: "run -v"},
		{args: []string{"fail"}, code: 1, ran: "fail ", errIn: "prog fail: boom"},
		{args: []string{"misuse"}, code: 2, ran: "misuse "},
		{args: []string{"nope"}, code: 2, errIn: `unknown command "nope"`},
		// Help lists every command, on stdout.
		{args: []string{"-h"}, code: 0, out: "the misuse command"},
		{args: []string{"help"}, code: 0, out: "fail "},
	}
	for _, tc := range tests {
		ran = nil
		var stdout, stderr bytes.Buffer
		code := p.Main(tc.args, &stdout, &stderr)
		got := strings.Join(ran, ";")
		if code != tc.code || got != tc.ran || !strings.Contains(stdout.String(), tc.out) || !strings.Contains(stderr.String(), tc.errIn) {
			t.Errorf("Main(%q) = %d, ran %q, stdout %q, stderr %q; want %d, ran %q, stdout with %q, stderr with %q",
				tc.args, code, got, stdout.String(), stderr.String(), tc.code, tc.ran, tc.out, tc.errIn)
		}
	}
	// A program without a default command needs one.
	p.Default = ""
	var stderr bytes.Buffer
	if code := p.Main([]string{"-x"}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "commands:") {
		t.Errorf("no command: exit %d, %q", code, stderr.String())
	}
}

func TestConfigFlags(t *testing.T) {
	fs := NewFlagSet("prog run", io.Discard)
	cf := ConfigFlags{Daemon: true}
	cf.Register(fs)
	if err := ParseFlags(fs, []string{"-listen", "inet:127.0.0.1:1", "-metrics-listen", "off", "-data-dir", "/d", "-log-level", "debug", "-redis", "redis://h:1/0"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cf.Load()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "inet:127.0.0.1:1" || cfg.MetricsListen != "" || cfg.DataDir != "/d" || cfg.Log.Level != "debug" || cfg.Store.Redis.URL != "redis://h:1/0" {
		t.Errorf("flags not applied: %+v", cfg)
	}
	// The offline commands have no listener flags.
	fs = NewFlagSet("prog scan", io.Discard)
	cf = ConfigFlags{}
	cf.Register(fs)
	if err := ParseFlags(fs, []string{"-listen", "x"}); !errors.Is(err, ErrUsage) {
		t.Errorf("-listen on an offline command: %v, want ErrUsage", err)
	}
	cf = ConfigFlags{LogLevel: "loud"}
	if _, err := cf.Load(); err == nil {
		t.Error("an invalid log level passed validation")
	}
}
