package daemon

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// secretBytes is the size of a generated secret: 256 bits, hex-encoded in
// the file.
const secretBytes = 32

// LoadSecret reads the secret that keys every signature hash, creating it
// (mode 0600) when the file does not exist. It refuses a file that others
// can read or that group or others can write: whoever knows the secret can
// predict which parts of a message matter and randomise exactly those.
func LoadSecret(path string) (secret []byte, created bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		secret, err = createSecret(path)
		return secret, err == nil, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("read secret key: %w", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, false, fmt.Errorf("stat secret key: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o007 != 0 || perm&0o020 != 0 {
		return nil, false, fmt.Errorf("secret key %s has mode %04o: it must not be readable by others nor writable by group or others; run: chmod 600 %s", path, perm, path)
	}
	secret, err = hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, false, fmt.Errorf("secret key %s: not hex: %w", path, err)
	}
	if len(secret) < 16 {
		return nil, false, fmt.Errorf("secret key %s: %d bytes, want at least 16", path, len(secret))
	}
	return secret, false, nil
}

func createSecret(path string) ([]byte, error) {
	secret := make([]byte, secretBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create secret key directory: %w", err)
	}
	// O_EXCL: two daemons starting at once must not each write a key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		s, _, err := LoadSecret(path)
		return s, err
	}
	if err != nil {
		return nil, fmt.Errorf("create secret key: %w", err)
	}
	if _, err := f.WriteString(hex.EncodeToString(secret) + "\n"); err != nil {
		f.Close()
		return nil, fmt.Errorf("write secret key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("write secret key: %w", err)
	}
	return secret, f.Close()
}
