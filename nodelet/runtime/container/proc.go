package container

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sluicehq/sluice/nodelet/runtime/container/shim"
)

func itoa(i int) string { return strconv.Itoa(i) }

// pidWatch is a pidfd: a handle on one process that survives PID reuse.
// Waiting uses the Go netpoller, so a watched process costs no thread.
// Closing the file ends every wait and makes later signals fail.
type pidWatch struct {
	pid int
	f   *os.File
}

// watchPid opens a pidfd for pid.
func watchPid(pid int) (*pidWatch, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return &pidWatch{pid: pid, f: os.NewFile(uintptr(fd), "pidfd:"+itoa(pid))}, nil
}

// wait blocks until the process has exited, or returns an error once w is
// closed.
func (w *pidWatch) wait() error { return shim.AwaitExit(w.f) }

// exited reports whether the process has exited, without blocking.
func (w *pidWatch) exited() bool {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return true
	}
	var done bool
	_ = rc.Control(func(fd uintptr) {
		n, _ := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		done = n > 0
	})
	return done
}

// signal sends sig to the process; it fails once w is closed.
func (w *pidWatch) signal(sig unix.Signal) error {
	rc, err := w.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.PidfdSendSignal(int(fd), sig, nil, 0) }); err != nil {
		return err
	}
	if errors.Is(serr, unix.ESRCH) {
		return nil // already gone
	}
	return serr
}

func (w *pidWatch) close() { _ = w.f.Close() }

// procStartTime is the start time of pid in clock ticks since boot (field
// 22 of /proc/PID/stat), which with the PID identifies a process.
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	return strconv.ParseUint(string(fields[19]), 10, 64)
}
