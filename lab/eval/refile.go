package eval

import (
	"context"
	"sync"
	"time"

	"github.com/bulkmilter/bulkmilter/detect"
	"github.com/bulkmilter/bulkmilter/refile"
)

// refileSim refiles one world as the daemon would (issue 17): the
// daemon's refile.Refiler, fed by refile.Refiler.Note after every
// verdict, with a mailbox in memory in place of Dovecot. It gives the
// recall over all copies of a campaign, the first T included.
type refileSim struct {
	r   *refile.Refiler
	box *simBox
}

// simBox is every recipient's INBOX: the copies delivered untagged.
type simBox struct {
	mu    sync.Mutex
	inbox map[refile.Copy]bool
	moved map[refile.Copy]bool
}

func (b *simBox) Move(_ context.Context, _ string, copies []refile.Copy) []refile.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]refile.Result, len(copies))
	for i, c := range copies {
		if !b.inbox[c] {
			out[i].Outcome = refile.NotInInbox
			continue
		}
		delete(b.inbox, c)
		b.moved[c] = true
	}
	return out
}

// newRefileSim starts a refiler with the daemon's defaults (its window is
// the store's default window, 24h, as the eval's pipeline has).
func newRefileSim() (*refileSim, error) {
	box := &simBox{inbox: map[refile.Copy]bool{}, moved: map[refile.Copy]bool{}}
	r, err := refile.New(refile.Options{Mover: box, Backoff: time.Millisecond})
	if err != nil {
		return nil, err
	}
	return &refileSim{r: r, box: box}, nil
}

// deliver files a copy to one recipient as the daemon's verdict has it
// and hands the verdict to the refiler.
func (s *refileSim) deliver(v detect.Verdict, rcpt, msgID string, at time.Time) refile.Copy {
	c := refile.Copy{Recipient: rcpt, MessageID: msgID}
	if !v.Bulk {
		s.box.mu.Lock()
		s.box.inbox[c] = true
		s.box.mu.Unlock()
	}
	s.r.Note(v, []refile.Copy{c}, at)
	return c
}

// finish waits for the moves queued (the refiler runs them in the
// background), stops the refiler and returns the copies moved.
func (s *refileSim) finish(ctx context.Context) (map[refile.Copy]bool, error) {
	for {
		if q, _ := s.r.Pending(); q == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			s.r.Close()
			return nil, err
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.r.Close(); err != nil {
		return nil, err
	}
	s.box.mu.Lock()
	defer s.box.mu.Unlock()
	return s.box.moved, nil
}
