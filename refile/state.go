package refile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// stateVersion changes when the file's form does; a file of another
// version is set aside, not misread.
const stateVersion = 1

// state is what Options.File holds.
type state struct {
	Version int       `json:"version"`
	Saved   time.Time `json:"saved"`
	Ledger  []*entry  `json:"ledger"`
	Jobs    []*job    `json:"jobs"`
}

// saver writes the state: soon after the queue changes, at most every
// SaveEvery after the ledger does.
func (r *Refiler) saver() {
	defer r.wg.Done()
	if r.opt.File == "" {
		return
	}
	tick := time.NewTicker(r.opt.SaveEvery)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.saveCh:
		case <-tick.C:
		}
		r.mu.Lock()
		need := r.dirty || r.jobDirty
		r.mu.Unlock()
		if !need {
			continue
		}
		switch err := r.save(); {
		case err != nil && !failing:
			failing = true
			r.opt.Logger.Error("refile: cannot save the ledger and queue; a restart would lose them", "file", r.opt.File, "err", err)
		case err == nil && failing:
			failing = false
			r.opt.Logger.Info("refile: saving the ledger and queue again", "file", r.opt.File)
		}
	}
}

// save writes the ledger and the queue to Options.File atomically.
func (r *Refiler) save() error {
	if r.opt.File == "" {
		return nil
	}
	r.mu.Lock()
	st := state{Version: stateVersion, Saved: r.now(), Ledger: make([]*entry, 0, r.order.Len())}
	for el := r.order.Front(); el != nil; el = el.Next() {
		e := *el.Value.(*entry)
		st.Ledger = append(st.Ledger, &e)
	}
	for _, j := range r.jobs {
		c := *j
		c.Copies = append([]Copy(nil), j.Copies...)
		st.Jobs = append(st.Jobs, &c)
	}
	r.dirty, r.jobDirty = false, false
	r.mu.Unlock()

	data, err := json.Marshal(st)
	if err == nil {
		err = writeAtomic(r.opt.File, data)
	}
	if err != nil {
		r.mu.Lock()
		r.dirty, r.jobDirty = true, true
		r.mu.Unlock()
		return fmt.Errorf("save %s: %w", r.opt.File, err)
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

// load reads Options.File. A file that cannot be parsed is set aside as
// FILE.bad and the refiler starts empty, with an error logged: refiling
// is never a reason not to start.
func (r *Refiler) load() error {
	if r.opt.File == "" {
		return nil
	}
	data, err := os.ReadFile(r.opt.File)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("refile: read %s: %w", r.opt.File, err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil || st.Version != stateVersion {
		if err == nil {
			err = fmt.Errorf("version %d, want %d", st.Version, stateVersion)
		}
		bad := r.opt.File + ".bad"
		if rerr := os.Rename(r.opt.File, bad); rerr != nil {
			return fmt.Errorf("refile: %s is unreadable (%v) and cannot be set aside: %w", r.opt.File, err, rerr)
		}
		r.opt.Observer.RefileSkipped(SkipUnreadable, 1)
		r.opt.Logger.Error("refile: state file unreadable; set aside, starting with an empty ledger and queue",
			"file", r.opt.File, "moved_to", bad, "err", err)
		return nil
	}
	now := r.now()
	for _, e := range st.Ledger {
		if e == nil || e.Campaign == "" || now.Sub(e.At) > r.opt.Window {
			continue
		}
		if len(r.byCamp[e.Campaign]) >= r.opt.MaxPerCampaign || r.order.Len() >= r.opt.MaxEntries {
			continue // the bounds may have shrunk since
		}
		r.byCamp[e.Campaign] = append(r.byCamp[e.Campaign], r.order.PushBack(e))
	}
	for _, j := range st.Jobs {
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
