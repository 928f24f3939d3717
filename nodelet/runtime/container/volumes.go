package container

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	pathrs "github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/nodelet/runtime"
)

// volumesDir holds, in a pod's state directory, one mount point per
// volume of the pod, which its containers' mounts bind from.
const volumesDir = "volumes"

// MinScratchSize is the smallest scratch filesystem: a smaller scratch
// volume gets this size.
const MinScratchSize = 1 << 20

// Scratch filesystems are ext4 without a journal (a scratch volume does
// not outlive its pod, so it need not survive a crash), with no blocks
// reserved for root and inode tables left to read as the zeroes the
// image holds (lazy_itable_init, and noinit_itable at mount), without
// discarding the image (which would undo its allocation).
var (
	mkfsArgs   = []string{"-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "nodiscard,lazy_itable_init=1"}
	scratchOpt = "noinit_itable"
)

// volumeDir is where pod dir's volume name is mounted on the host.
func volumeDir(podDir, name string) string { return filepath.Join(podDir, volumesDir, name) }

// scratchImages is the directory of pod id's scratch images.
func (r *Runtime) scratchImages(id string) string { return filepath.Join(r.cfg.ScratchDir, id) }

// setupVolumes makes p's volumes: each scratch volume's filesystem, and
// each host path's bind mount, at its mount point in p's directory. What
// it made before a failure stays for cleanup.
func (r *Runtime) setupVolumes(p *pod) error {
	vols := p.rec.Spec.Volumes
	if len(vols) == 0 {
		return nil
	}
	if err := os.Mkdir(filepath.Join(p.dir, volumesDir), 0o700); err != nil {
		return err
	}
	for i := range vols {
		v := &vols[i]
		var err error
		if v.IsScratch() {
			err = r.makeScratch(p.id, v, volumeDir(p.dir, v.Name))
		} else {
			err = bindHostPath(v, volumeDir(p.dir, v.Name))
		}
		if err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

// makeScratch makes scratch volume v of pod id at target: an ext4
// filesystem on an image of v's size, allocated in full so that the
// pod's writes never find the host's disk full, on a loop device that
// goes when the filesystem is unmounted. The host has mkfs.ext4: validate
// refuses a scratch volume otherwise.
func (r *Runtime) makeScratch(id string, v *runtime.Volume, target string) error {
	dir := r.scratchImages(id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	img := filepath.Join(dir, v.Name+".img")
	f, err := os.OpenFile(img, os.O_RDWR|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	size := max(v.ScratchSize, MinScratchSize)
	switch err := unix.Fallocate(int(f.Fd()), 0, 0, size); {
	case errors.Is(err, unix.EOPNOTSUPP):
		// A filesystem that cannot allocate ahead gets a sparse image:
		// the size still bounds the pod, but a full host disk fails its
		// writes with EIO rather than at the start.
		if err := f.Truncate(size); err != nil {
			return fmt.Errorf("size %s: %w", img, err)
		}
	case errors.Is(err, unix.ENOSPC):
		return fmt.Errorf("no room for %d bytes of scratch in %s: %w", size, r.cfg.ScratchDir, err)
	case err != nil:
		return fmt.Errorf("allocate %s: %w", img, err)
	}
	if out, err := exec.Command(r.mkfs, append(mkfsArgs, img)...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", r.mkfs, err, out)
	}
	loop, err := attachLoop(f)
	if err != nil {
		return err
	}
	// The loop device clears itself once unmounted and closed; until the
	// mount holds it, this descriptor does.
	defer loop.Close()
	if err := os.Mkdir(target, 0o700); err != nil {
		return err
	}
	if err := unix.Mount(loop.Name(), target, "ext4", unix.MS_NOSUID|unix.MS_NODEV, scratchOpt); err != nil {
		return fmt.Errorf("mount %s: %w", loop.Name(), err)
	}
	// Every container of the pod writes there, whatever its user.
	if err := os.Chmod(target, 0o777); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(target, "lost+found")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// attachLoop attaches img to a free loop device, with autoclear and
// direct I/O (the image's pages are not cached twice), and returns the
// device open. Another process may take the device found free first: the
// attach is retried on another.
func attachLoop(img *os.File) (*os.File, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("loop devices: %w", err)
	}
	defer ctl.Close()
	cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR | unix.LO_FLAGS_DIRECT_IO
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], img.Name())
	var last error
	for range 32 {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, fmt.Errorf("find a free loop device: %w", err)
		}
		dev, err := os.OpenFile("/dev/loop"+strconv.Itoa(n), os.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			last = err // the device node may not be there yet
			time.Sleep(time.Millisecond)
			continue
		}
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if err == nil {
			return dev, nil
		}
		dev.Close()
		if !errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("attach %s to %s: %w", img.Name(), dev.Name(), err)
		}
		last = err
	}
	return nil, fmt.Errorf("attach %s to a loop device: %w", img.Name(), last)
}

// bindHostPath bind-mounts host path volume v at target, read-only if v
// is. The path is opened from v.HostRoot without leaving it (a symbolic
// link is resolved as if HostRoot were "/"), and the mount made from that
// handle, so what is mounted is below the root even if the path changed
// after it was checked. A path that cannot be so opened is an
// ErrVolumeDenied error.
func bindHostPath(v *runtime.Volume, target string) error {
	rel, err := filepath.Rel(v.HostRoot, v.HostPath)
	if err != nil {
		return err
	}
	h, err := pathrs.OpenInRoot(v.HostRoot, rel)
	if err != nil {
		return &runtime.VolumeDeniedError{Volume: v.Name, Path: v.HostPath, Why: fmt.Sprintf("cannot be opened below %s: %v", v.HostRoot, unwrapPath(err))}
	}
	defer h.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(h.Fd()), &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		err = os.Mkdir(target, 0o700)
	case unix.S_IFREG:
		err = os.WriteFile(target, nil, 0o600)
	default:
		return &runtime.VolumeDeniedError{Volume: v.Name, Path: v.HostPath, Why: "is neither a directory nor a regular file"}
	}
	if err != nil {
		return err
	}
	if err := unix.Mount("/proc/self/fd/"+strconv.Itoa(int(h.Fd())), target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", v.HostPath, err)
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	if v.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", v.HostPath, err)
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// unmountVolumes unmounts the volumes of the pod in podDir and removes
// its scratch images. It stops at a volume it cannot unmount, so that
// nothing is removed through a mount.
func (r *Runtime) unmountVolumes(id, podDir string) error {
	ents, err := os.ReadDir(filepath.Join(podDir, volumesDir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, e := range ents {
		m := filepath.Join(podDir, volumesDir, e.Name())
		// A mount point holds one mount; detached, it is gone from the
		// host at once, and its loop device with it once no process
		// holds the filesystem.
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("unmount %s: %w", m, err)
		}
	}
	if err := os.RemoveAll(r.scratchImages(id)); err != nil {
		return fmt.Errorf("remove scratch images: %w", err)
	}
	return nil
}

// removeOrphanScratch removes the scratch images of pods the state
// directory no longer has (a host that rebooted lost their state with
// its mounts; the images stay on disk).
func (r *Runtime) removeOrphanScratch(pods map[string]*pod) {
	ents, err := os.ReadDir(r.cfg.ScratchDir)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			r.cfg.Logger.Warn("list scratch images", "dir", r.cfg.ScratchDir, "err", err)
		}
		return
	}
	for _, e := range ents {
		if pods[e.Name()] != nil {
			continue
		}
		if _, err := os.Lstat(r.podDir(e.Name())); err == nil {
			continue // its pod was cleaned away and kept: cleanup owns it
		}
		if err := os.RemoveAll(filepath.Join(r.cfg.ScratchDir, e.Name())); err != nil {
			r.cfg.Logger.Warn("remove scratch of a pod gone", "pod", e.Name(), "err", err)
		}
	}
}

// scratchFull returns the names of p's scratch volumes found full when
// it ended: with less than 1/64 of the filesystem or 1 MiB free (whichever
// is smaller) or no inode free; or, when the pod failed (code not 0),
// named with "no space left on device" on a line of the last 64 KiB a
// container wrote, by the path the container mounts the volume at. The
// second catches a write refused whole: ext4 refuses a write larger than
// what is free before writing any of it, so the filesystem is left as
// empty as it was.
func scratchFull(p *pod, code int) []string {
	var full []string
	var lines []string // ENOSPC lines of the containers' output, read once
	read := false
	for _, v := range p.rec.Spec.Volumes {
		if !v.IsScratch() {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(volumeDir(p.dir, v.Name), &st); err != nil || st.Type != unix.EXT4_SUPER_MAGIC {
			continue // not mounted: nothing is known
		}
		total, free := st.Blocks*uint64(st.Bsize), st.Bavail*uint64(st.Bsize)
		if free < min(total/64, 1<<20) || st.Ffree == 0 {
			full = append(full, v.Name)
			continue
		}
		if code == 0 {
			continue
		}
		if !read {
			lines, read = enospcLines(p), true
		}
		if mentionsMount(lines, p.rec.Spec.Containers, v.Name) {
			full = append(full, v.Name)
		}
	}
	return full
}

// logTail is how much of the end of each container's output scratchFull
// reads.
const logTail = 64 << 10

// enospcLines returns the lines of the last logTail bytes of each of p's
// containers' output that say "no space left on device" (any case).
func enospcLines(p *pod) []string {
	var out []string
	for _, c := range podContainers(&p.rec.Spec) {
		f, err := os.Open(filepath.Join(p.dir, logsDir, c.Name+".log"))
		if err != nil {
			continue
		}
		buf := make([]byte, logTail)
		var n int
		if st, err := f.Stat(); err == nil {
			n, _ = f.ReadAt(buf, max(0, st.Size()-logTail))
		}
		f.Close()
		for line := range strings.SplitSeq(string(buf[:n]), "\n") {
			if strings.Contains(strings.ToLower(line), "no space left on device") {
				out = append(out, line)
			}
		}
	}
	return out
}

// mentionsMount reports whether a line names a path at or below where a
// container mounts volume.
func mentionsMount(lines []string, cs []runtime.ContainerSpec, volume string) bool {
	for _, c := range cs {
		for _, m := range c.Mounts {
			if m.Volume == volume && slices.ContainsFunc(lines, func(l string) bool { return namesPath(l, m.Path) }) {
				return true
			}
		}
	}
	return false
}

// namesPath reports whether line names path or a path below it: path
// itself, not inside a longer path.
func namesPath(line, path string) bool {
	const around = " '\"`:,()[]"
	for from := 0; ; {
		i := strings.Index(line[from:], path)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(path)
		before := i == 0 || strings.IndexByte(around, line[i-1]) >= 0
		after := end == len(line) || line[end] == '/' || strings.IndexByte(around, line[end]) >= 0
		if before && after {
			return true
		}
		from = i + 1
	}
}

// findMkfs returns the mkfs.ext4 on PATH or in /usr/sbin or /sbin, or ""
// if there is none.
func findMkfs() string {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p
	}
	for _, p := range []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"} {
		if CheckShim(p) == nil {
			return p
		}
	}
	return ""
}
