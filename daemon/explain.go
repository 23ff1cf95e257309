package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/bulkmilter/bulkmilter/config"
	"github.com/bulkmilter/bulkmilter/explain"
)

// Explain explains one raw message against the runtime's store, read only
// (detect.Engine.Peek): milterd explain and the /admin/explain endpoint.
func (rt *Runtime) Explain(ctx context.Context, raw []byte, rcpts []string, name string) any {
	r := rt.ExplainReport(ctx, raw, rcpts, name)
	return &r
}

// ExplainReport is Explain with its type.
func (rt *Runtime) ExplainReport(ctx context.Context, raw []byte, rcpts []string, name string) explain.Report {
	v, res := rt.engine.Peek(ctx, rt.Message(raw, rcpts, time.Time{}))
	return explain.New(name, v, res, rt.engine.Threshold)
}

// StoreSnapshot prepares a configuration whose embedded store is a copy of
// the configured one, for a command that must read the store and never
// write it (explain): the copy is opened, saved and closed by whoever
// likes, and removed by cleanup. The original is locked while it is
// copied; ErrStoreBusy means a running daemon holds it (ask the daemon).
// A configuration with Redis is returned as it is.
func StoreSnapshot(cfg *config.Config) (snap *config.Config, cleanup func(), err error) {
	if cfg.UsesRedis() {
		return cfg, func() {}, nil
	}
	unlock, err := lockStore(cfg.StoreFile())
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	dir, err := os.MkdirTemp("", "bulkmilter-explain-")
	if err != nil {
		return nil, nil, err
	}
	cleanup = func() { os.RemoveAll(dir) }
	c := *cfg
	c.Store.File = filepath.Join(dir, "store.db")
	if err := copyFile(cfg.StoreFile(), c.Store.File); err != nil && !errors.Is(err, os.ErrNotExist) {
		cleanup()
		return nil, nil, fmt.Errorf("copy the store file: %w", err)
	}
	return &c, cleanup, nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
