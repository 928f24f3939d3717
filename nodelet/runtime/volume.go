package runtime

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrVolumeDenied: a volume of the spec may not be given to the pod on
// this host (a host path outside the volume roots, or writable below a
// read-only one). The error is a *VolumeDeniedError.
var ErrVolumeDenied = errors.New("runtime: volume denied")

// VolumeDeniedError is the ErrVolumeDenied error of one volume.
type VolumeDeniedError struct {
	// Volume is the volume's name.
	Volume string
	// Path is the host path as the spec gives it.
	Path string
	// Why says what is wrong with it.
	Why string
}

func (e *VolumeDeniedError) Error() string {
	return fmt.Sprintf("volume %q: host path %s %s", e.Volume, e.Path, e.Why)
}

// Unwrap returns ErrVolumeDenied.
func (e *VolumeDeniedError) Unwrap() error { return ErrVolumeDenied }

// VolumeRoot is a host directory below which pods may mount host paths.
type VolumeRoot struct {
	// Path is a clean absolute path other than "/".
	Path string
	// Writable lets pods mount what is below it writable; otherwise
	// every mount of a host path below it must be read-only.
	Writable bool
}

func (r VolumeRoot) String() string {
	if r.Writable {
		return r.Path + ":rw"
	}
	return r.Path
}

// ParseVolumeRoots parses roots given as "PATH" (read-only) or
// "PATH:rw" (writable), or "PATH:ro", and reports every problem at once:
// each path must be clean, absolute and not "/", and given once.
func ParseVolumeRoots(specs []string) ([]VolumeRoot, error) {
	var (
		roots []VolumeRoot
		errs  []error
	)
	seen := map[string]bool{}
	for _, s := range specs {
		p, mode, hasMode := strings.Cut(s, ":")
		r := VolumeRoot{Path: p}
		switch {
		case !hasMode || mode == "ro":
		case mode == "rw":
			r.Writable = true
		default:
			errs = append(errs, fmt.Errorf("volume root %q: the mode after ':' must be rw or ro", s))
			continue
		}
		switch {
		case !cleanAbs(p):
			errs = append(errs, fmt.Errorf("volume root %q: must be a clean absolute path", s))
		case p == "/":
			errs = append(errs, fmt.Errorf("volume root %q: must not be the host's root", s))
		case seen[p]:
			errs = append(errs, fmt.Errorf("volume root %q: given twice", s))
		default:
			seen[p] = true
			roots = append(roots, r)
		}
	}
	return roots, errors.Join(errs...)
}

// ResolveHostPath checks host path p of volume name against roots and
// returns the volume a runtime mounts: p resolved (symbolic links
// followed), below the resolved root that contains it, read-only unless
// writable is asked for. writable says whether any container mounts the
// volume writable.
//
// The root is the innermost one whose path, as spelled, contains p, so
// that "/srv:rw" and "/srv/in" make /srv/in read-only. The refusals are
// *VolumeDeniedError values (ErrVolumeDenied) naming p: no roots at all; p
// not clean and absolute (".." in it); p below no root; p, after its
// symbolic links, leading out of its root; a writable mount below a
// read-only root; p missing. p is compared with the roots as spelled
// before anything on the disk is read, so that a refusal tells nothing of
// what exists outside them.
//
// The check holds at the time of the call. A runtime mounting the result
// opens HostPath from HostRoot without leaving it (Volume.HostRoot), so
// that a link swapped in afterwards cannot lead the mount out of the root.
func ResolveHostPath(roots []VolumeRoot, name, p string, writable bool) (Volume, error) {
	denied := func(format string, args ...any) (Volume, error) {
		return Volume{}, &VolumeDeniedError{Volume: name, Path: p, Why: fmt.Sprintf(format, args...)}
	}
	if len(roots) == 0 {
		return denied("is refused: this node has no volume roots, so pods mount no host paths")
	}
	if !cleanAbs(p) {
		return denied("is not a clean absolute path (no '..', '.' or '//')")
	}
	var root *VolumeRoot
	for i := range roots {
		r := &roots[i]
		if within(r.Path, p) && (root == nil || len(r.Path) > len(root.Path)) {
			root = r
		}
	}
	if root == nil {
		return denied("is not below a volume root (%s)", joinRoots(roots))
	}
	if writable && !root.Writable {
		return denied("is below the read-only volume root %s: mount it read_only, or give the root as %s:rw", root.Path, root.Path)
	}
	realRoot, err := filepath.EvalSymlinks(root.Path)
	if err != nil {
		return denied("is below the volume root %s, which cannot be resolved: %v", root.Path, unwrapPath(err))
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, os.ErrNotExist) {
		return denied("does not exist")
	}
	if err != nil {
		return denied("cannot be resolved: %v", unwrapPath(err))
	}
	if !within(realRoot, real) {
		return denied("leads out of the volume root %s through a symbolic link (to %s)", root.Path, real)
	}
	return Volume{Name: name, HostPath: real, HostRoot: realRoot, ReadOnly: !writable}, nil
}

// ResolveHostPaths resolves every host path volume of s against roots
// (ResolveHostPath): a volume is writable when it is not read-only and a
// container mounts it writable. It gives s a Volumes slice of its own, so
// that a spec sharing its slices with others' may be resolved. The error
// names every volume refused, on one line; it is an ErrVolumeDenied one,
// and s is left as it was.
func (s *PodSpec) ResolveHostPaths(roots []VolumeRoot) error {
	if !slices.ContainsFunc(s.Volumes, func(v Volume) bool { return v.HostPath != "" }) {
		return nil
	}
	vols := slices.Clone(s.Volumes)
	var denied volumeErrors
	for i := range vols {
		v := &vols[i]
		if v.HostPath == "" {
			continue
		}
		writable := !v.ReadOnly && slices.ContainsFunc(s.Containers, func(c ContainerSpec) bool {
			return slices.ContainsFunc(c.Mounts, func(m Mount) bool { return m.Volume == v.Name && !m.ReadOnly })
		})
		r, err := ResolveHostPath(roots, v.Name, v.HostPath, writable)
		if err != nil {
			denied = append(denied, err)
			continue
		}
		*v = r
	}
	if len(denied) > 0 {
		return denied
	}
	s.Volumes = vols
	return nil
}

// volumeErrors are the refusals of a pod's volumes, in one line.
type volumeErrors []error

func (e volumeErrors) Error() string {
	s := make([]string, len(e))
	for i, err := range e {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

func (e volumeErrors) Unwrap() []error { return e }

// unwrapPath drops the path from a *PathError, which the message names.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func joinRoots(roots []VolumeRoot) string {
	s := make([]string, len(roots))
	for i, r := range roots {
		s[i] = r.String()
	}
	return strings.Join(s, ", ")
}
