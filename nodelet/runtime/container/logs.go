package container

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// openLog opens a container's log file for the container to write to. It
// is append-only, so that after the janitor truncates it writes continue
// at its new end.
func openLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
}

// capLog keeps the log at path under max bytes: when it is larger, its
// contents move to path.1 (replacing the previous) and it is truncated.
// Output written between the copy and the truncation is lost; the writer
// keeps its file descriptor, so nothing blocks it.
func capLog(path string, max int64) error {
	st, err := os.Stat(path)
	if err != nil || st.Size() <= max {
		return err
	}
	src, err := os.Open(path)
	if err != nil {
		return err
	}
	defer src.Close()
	tmp := path + ".1.tmp"
	dst, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, io.LimitReader(src, max))
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path+".1")
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("rotate %s: %w", path, err)
	}
	return os.Truncate(path, 0)
}

// followReader reads a log file as it grows, until done is closed and the
// file is drained, or ctx is done. It restarts from the beginning when the
// file shrinks (the janitor truncated it).
type followReader struct {
	ctx  context.Context
	f    *os.File
	done <-chan struct{}
	off  int64
}

func (r *followReader) Read(p []byte) (int, error) {
	for {
		n, err := r.f.ReadAt(p, r.off)
		r.off += int64(n)
		if n > 0 {
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if st, err := r.f.Stat(); err == nil && st.Size() < r.off {
			r.off = 0
			continue
		}
		select {
		case <-r.done:
			// Drain what was written before the end.
			n, err := r.f.ReadAt(p, r.off)
			r.off += int64(n)
			if n > 0 {
				return n, nil
			}
			if err == nil {
				err = io.EOF
			}
			return 0, err
		case <-r.ctx.Done():
			return 0, r.ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (r *followReader) Close() error { return r.f.Close() }
