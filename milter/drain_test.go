package milter

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bulkmilter/bulkmilter/internal/mtaclient"
)

// An MTA connection that carries message after message does not hold the
// drain: once Shutdown starts, the connection closes after the reply to
// its current message, and Shutdown returns long before its deadline. The
// next message fails (the MTA applies its default action): before its
// end, or, when the client had sent it whole before the close reached it
// (the protocol has no reply before end of message), without a reply; it
// never reached the milter. Before, the drain waited for the deadline and
// cut off whatever was in progress then.
func TestShutdownClosesBusyConnectionsAfterTheirReply(t *testing.T) {
	h := start(t, nil)
	sess, err := mtaclient.New("tcp", h.addr).Open(mtaclient.Envelope{From: "a@b.example", Rcpts: []string{"c@example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	if _, err := sess.Send("", nil, []byte(plain)); err != nil {
		t.Fatal(err)
	}
	shut := make(chan error, 1)
	started := time.Now()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		shut <- h.srv.Shutdown(ctx)
	}()
	// The session goes on sending, as a busy SMTP session would.
	// A bound for a connection never closed, far above a busy machine's
	// stalls (seconds): the close comes after the current reply.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err := sess.Send("", nil, []byte(plain))
		if err != nil {
			t.Logf("next message: %v (sent whole without reply: %v)", err, errors.Is(err, mtaclient.ErrNoReply))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("messages on an open connection still accepted a minute after Shutdown")
		}
	}
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown still waiting 10 s after new messages were refused")
	}
	t.Logf("drained in %s", time.Since(started))
}
