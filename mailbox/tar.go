package mailbox

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// walkTar walks the members of a tar stream in archive order. p is the archive's path
// (for errors), prefix is prepended to member names.
func (w *walker) walkTar(r io.Reader, p, prefix string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("mailbox: read tar %s: %w", p, err)
		}
		// '\x00' is the pre-POSIX regular file type (tar.TypeRegA, deprecated).
		if hdr.Typeflag != tar.TypeReg && hdr.Typeflag != '\x00' {
			continue
		}
		member := cleanMember(hdr.Name)
		if member == "" {
			continue
		}
		name := prefix + member
		base := path.Base(member)
		if w.hooks.ReadSidecar != nil && strings.EqualFold(base, w.hooks.Sidecar) {
			if err := w.sidecar(name, tr); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		}
		if why := w.auxiliary(base); why != "" {
			if err := w.skipNotMessage(name, why); err != nil {
				return err
			}
			continue
		}
		ext := strings.ToLower(path.Ext(base))
		if split := w.hooks.Split[ext]; split != nil {
			if err := w.walkSplit(tr, p+":"+member, name, split); err != nil {
				return err
			}
			continue
		}
		if ext == ".mbox" || ext == ".mbx" {
			if err := w.walkMbox(tr, p+":"+member, name); err != nil {
				return err
			}
			continue
		}
		if !w.want(name) {
			continue
		}
		if w.tooLarge(hdr.Size) {
			if err := w.skipTooLarge(name, hdr.Size); err != nil {
				return err
			}
			continue
		}
		data, err := readMember(tr, hdr.Size)
		if err != nil {
			return fmt.Errorf("mailbox: read tar %s: member %s: %w", p, member, err)
		}
		if err := w.message(name, data); err != nil {
			return err
		}
	}
}

// cleanMember makes member names independent of how the archive was made ("./x", "/x").
func cleanMember(name string) string {
	name = path.Clean("/" + name)
	return strings.TrimPrefix(name, "/")
}

// readMember reads a member of the given size. Sizes are not trusted for allocation
// beyond a bound: a corrupt header must give an error, not an enormous allocation.
func readMember(r io.Reader, size int64) ([]byte, error) {
	if size > 64<<20 {
		b, err := io.ReadAll(r)
		if err == nil && int64(len(b)) != size {
			err = io.ErrUnexpectedEOF
		}
		return b, err
	}
	data := make([]byte, size)
	_, err := io.ReadFull(r, data)
	return data, err
}
