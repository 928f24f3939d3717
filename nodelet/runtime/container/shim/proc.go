package shim

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"
)

// What a shim and the container runtime both do with containers and their
// processes, whichever of the two creates the containers.

// The main goroutine keeps the main thread to itself, in every process
// that creates containers (the runtime's, and the shim). libcontainer
// joins each new container's mount namespace from a goroutine locked to
// its thread, and leaves the Go runtime to end that thread after; on the
// main thread, which the Go runtime never ends, the process would stay in
// that namespace for its life, keeping every mount of it (the pod's image
// overlays and scratch filesystems, and their loop devices) after the pod
// was removed.
func init() { runtime.LockOSThread() }

// firstStart holds back concurrent container starts in a process until
// one has set its cgroup limits: libcontainer's cgroup v1 controllers
// (github.com/opencontainers/cgroups/fs) detect some file names on their
// first Set into shared variables without a lock
// (BlkioGroup.detectWeightFilenames), which concurrent first starts race
// on. Once one start has set them, starts run in parallel.
var firstStart struct {
	sync.Mutex
	done atomic.Bool
}

// Start creates the container of req and starts its init process, which
// waits for the container's Exec to run the program, with logf as its
// stdout and stderr. It returns the init's pid. The container is returned,
// if created, even with an error.
func Start(req *Request, logf *os.File) (*libcontainer.Container, int, error) {
	if req.Config == nil {
		return nil, 0, errors.New("request has no container config")
	}
	lc, err := libcontainer.Create(req.Root, req.ID, req.Config)
	if err != nil {
		return nil, 0, fmt.Errorf("create: %w", err)
	}
	proc := &libcontainer.Process{
		Args: req.Args, Env: req.Env, Cwd: req.Cwd, UID: req.UID, GID: req.GID,
		Stdout: logf, Stderr: logf, Init: true,
	}
	if !firstStart.done.Load() {
		firstStart.Lock()
		defer firstStart.Unlock()
	}
	if err := lc.Start(proc); err != nil {
		return lc, 0, fmt.Errorf("run: %w", err)
	}
	firstStart.done.Store(true)
	pid, err := proc.Pid()
	return lc, pid, err
}

// AwaitExit blocks until the process of pidfd, a pidfd opened with
// PIDFD_NONBLOCK, has exited: the descriptor is then readable. The Go
// netpoller waits, no thread does. It returns an error once pidfd is
// closed.
func AwaitExit(pidfd *os.File) error {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Read(func(fd uintptr) bool {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return n > 0 || err != nil && !errors.Is(err, unix.EINTR)
	})
}

// Reap collects the exit status of pid, which must have exited, if it is
// a child of this process: its exit code, or 128+signal for a signalled
// process. known is false when it is not a child (a process adopted from
// an earlier nodelet, or reaped already).
func Reap(pid int) (code int, known bool) {
	var ws unix.WaitStatus
	for {
		got, err := unix.Wait4(pid, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || got != pid {
			return -1, false
		}
		break
	}
	switch {
	case ws.Exited():
		return ws.ExitStatus(), true
	case ws.Signaled():
		return 128 + int(ws.Signal()), true
	}
	return -1, false
}
