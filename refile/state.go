package refile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// stateVersion changes when the files' form does; a file of another
// version is set aside, not misread.
const stateVersion = 1

// ledgerState is what Options.File holds: the remembered copies. It can
// be large (tens of MB), so it is written every SaveEvery, not at every
// message.
type ledgerState struct {
	Version int       `json:"version"`
	Saved   time.Time `json:"saved"`
	Ledger  []*entry  `json:"ledger"`
}

// queueState is what Options.File + ".queue" holds: the move jobs. It is
// small and written soon after every change.
type queueState struct {
	Version int       `json:"version"`
	Saved   time.Time `json:"saved"`
	Jobs    []*job    `json:"jobs"`
}

func (r *Refiler) queueFile() string { return r.opt.File + ".queue" }

// saver writes the queue soon after it changes and the ledger every
// SaveEvery; it also forgets expired copies when no mail comes.
func (r *Refiler) saver() {
	defer r.wg.Done()
	tick := time.NewTicker(r.opt.SaveEvery)
	defer tick.Stop()
	failing := false
	for {
		var err error
		select {
		case <-r.ctx.Done():
			return
		case <-r.saveCh:
			err = r.saveQueue()
		case <-tick.C:
			r.mu.Lock()
			r.expire(r.clock())
			r.mu.Unlock()
			r.report()
			err = errors.Join(r.saveQueue(), r.saveLedger())
		}
		switch {
		case err != nil && !failing:
			failing = true
			r.opt.Logger.Error("refile: cannot save the ledger or the queue; a restart would lose them", "file", r.opt.File, "err", err)
		case err == nil && failing:
			failing = false
			r.opt.Logger.Info("refile: saving the ledger and the queue again", "file", r.opt.File)
		}
	}
}

// save writes both files.
func (r *Refiler) save() error { return errors.Join(r.saveQueue(), r.saveLedger()) }

func (r *Refiler) saveLedger() error {
	if r.opt.File == "" {
		return nil
	}
	r.mu.Lock()
	if !r.dirty {
		r.mu.Unlock()
		return nil
	}
	st := ledgerState{Version: stateVersion, Saved: r.now(), Ledger: make([]*entry, 0, r.order.Len())}
	for el := r.order.Front(); el != nil; el = el.Next() {
		st.Ledger = append(st.Ledger, el.Value.(*entry)) // entries are never modified
	}
	r.dirty = false
	r.mu.Unlock()
	return r.write(r.opt.File, st, &r.dirty)
}

func (r *Refiler) saveQueue() error {
	if r.opt.File == "" {
		return nil
	}
	r.mu.Lock()
	if !r.jobDirty {
		r.mu.Unlock()
		return nil
	}
	st := queueState{Version: stateVersion, Saved: r.now()}
	for _, j := range r.jobs {
		c := *j
		c.Copies = append([]Copy(nil), j.Copies...)
		c.Keys = append([]string(nil), j.Keys...)
		st.Jobs = append(st.Jobs, &c)
	}
	r.jobDirty = false
	r.mu.Unlock()
	return r.write(r.queueFile(), st, &r.jobDirty)
}

// write marshals v to path atomically; on failure *dirty is set again so
// the next save retries.
func (r *Refiler) write(path string, v any, dirty *bool) error {
	data, err := json.Marshal(v)
	if err == nil {
		err = writeAtomic(path, data)
	}
	if err != nil {
		r.mu.Lock()
		*dirty = true
		r.mu.Unlock()
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// writeAtomic writes data to a temporary file beside path, syncs it and
// renames it over path: a crash leaves the old file or the new one.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o600) // real addresses: the daemon's eyes only
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// readState reads one state file into v. A file that cannot be parsed is
// set aside as FILE.bad, counted and logged, and the refiler starts
// without it: refiling is never a reason not to start.
func (r *Refiler) readState(path string, v any, version *int) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("refile: read %s: %w", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil || *version != stateVersion {
		if err == nil {
			err = fmt.Errorf("version %d, want %d", *version, stateVersion)
		}
		bad := path + ".bad"
		if rerr := os.Rename(path, bad); rerr != nil {
			return fmt.Errorf("refile: %s is unreadable (%v) and cannot be set aside: %w", path, err, rerr)
		}
		r.opt.Observer.RefileSkipped(SkipUnreadable, 1)
		r.opt.Logger.Error("refile: state file unreadable; set aside, starting without it",
			"file", path, "moved_to", bad, "err", err)
		// The zero value again: nothing of the bad file is used.
		switch s := v.(type) {
		case *ledgerState:
			*s = ledgerState{}
		case *queueState:
			*s = queueState{}
		}
	}
	return nil
}

// load reads Options.File and its queue.
func (r *Refiler) load() error {
	if r.opt.File == "" {
		return nil
	}
	var ls ledgerState
	if err := r.readState(r.opt.File, &ls, &ls.Version); err != nil {
		return err
	}
	var qs queueState
	if err := r.readState(r.queueFile(), &qs, &qs.Version); err != nil {
		return err
	}
	now := r.now()
	for _, e := range ls.Ledger {
		if e == nil || e.Campaign == "" || now.Sub(e.At) > r.opt.Window {
			continue
		}
		if len(r.byCamp[e.Campaign]) >= r.opt.MaxPerCampaign || r.order.Len() >= r.opt.MaxEntries {
			continue // the bounds may have shrunk since
		}
		r.byCamp[e.Campaign] = append(r.byCamp[e.Campaign], r.order.PushBack(e))
	}
	for _, j := range qs.Jobs {
		if j == nil || len(j.Copies) == 0 {
			continue
		}
		j.Next = now // a restart is a good moment to try again
		r.jobs = append(r.jobs, j)
		r.queued += len(j.Copies)
	}
	if len(r.jobs) > 0 {
		r.opt.Logger.Info("refile: resuming move jobs", "jobs", len(r.jobs), "copies", r.queued)
	}
	return nil
}
