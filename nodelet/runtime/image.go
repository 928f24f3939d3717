package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ImageDeniedError is the ErrImageDenied error of an image path a host
// refuses to run.
type ImageDeniedError struct {
	// Path is the image path as the spec gives it.
	Path string
	// Why says what is wrong with it.
	Why string
}

func (e *ImageDeniedError) Error() string { return e.Path + " " + e.Why }

// Unwrap returns ErrImageDenied.
func (e *ImageDeniedError) Unwrap() error { return ErrImageDenied }

// CheckImageRoots reports every problem of a list of image roots: each
// must be a clean absolute path other than the host's root "/", which
// would confine nothing; the list must not be empty.
func CheckImageRoots(roots []string) error {
	if len(roots) == 0 {
		return errors.New("image roots: at least one is required")
	}
	var errs []error
	for _, r := range roots {
		switch {
		case !cleanAbs(r):
			errs = append(errs, fmt.Errorf("image root %q: must be a clean absolute path", r))
		case r == "/":
			errs = append(errs, fmt.Errorf("image root %q: must not be the host's root", r))
		}
	}
	return errors.Join(errs...)
}

// ConfineImage returns the path image path p resolves to, following
// symbolic links, when both p and what it resolves to lie strictly below
// one of roots (each resolved too: a root may itself be a link), so that a
// link inside a root cannot lead out of it. A path that does not is an
// *ImageDeniedError; so are a path that is not clean and absolute and one
// resolving to the host's root "/", whatever the roots. A path below a root
// that does not resolve (it does not exist) is the error of
// filepath.EvalSymlinks. A root that does not resolve confines nothing.
//
// p is checked against the roots as spelled before anything on the disk is
// read, so that a refusal tells nothing of what exists outside them.
//
// The check holds only while the roots' contents change no more, as the
// host's images: whoever can write below a root can swap a checked
// directory for a link after the check. Callers use the returned path,
// not p, so that a link swapped in along p after the check is not
// followed.
func ConfineImage(roots []string, p string) (string, error) {
	denied := func(format string, args ...any) (string, error) {
		return "", &ImageDeniedError{Path: p, Why: fmt.Sprintf(format, args...)}
	}
	if !cleanAbs(p) {
		return denied("is not a clean absolute path")
	}
	if p == "/" {
		return denied("is the host's root")
	}
	if !belowAny(roots, p) {
		return denied("is not below an image root (%s)", strings.Join(roots, ", "))
	}
	resolved, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	if resolved == "/" {
		return denied("resolves to the host's root")
	}
	for _, r := range roots {
		rr, err := filepath.EvalSymlinks(r)
		if err == nil && below(rr, resolved) {
			return resolved, nil
		}
	}
	return denied("resolves to %s, which is not below an image root (%s)", resolved, strings.Join(roots, ", "))
}

// belowAny reports whether p lies strictly below one of roots as they are
// spelled.
func belowAny(roots []string, p string) bool {
	for _, r := range roots {
		if below(filepath.Clean(r), p) {
			return true
		}
	}
	return false
}

// below reports whether clean absolute path p lies strictly below clean
// absolute directory root.
func below(root, p string) bool { return p != root && within(root, p) }
