package container

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/opencontainers/runc/libcontainer"
	// nsenter joins namespaces (cgo) before the Go runtime starts in the
	// re-executed "init"; it must be linked into every binary that runs
	// containers.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	"golang.org/x/sys/unix"
)

// Argument values of the binary re-executed by the runtime.
const (
	initArg  = "init"
	pauseArg = "sluice-pause"
)

// Reexec runs the re-executed roles of the binary, and does not return
// from them: libcontainer's "init" (the container's first process before
// it execs the user's program) and the pod sandbox's pause process. When
// the process is neither it returns at once, having done nothing. Every
// binary that uses this package (commands, and test binaries through
// TestMain) must call it first thing in main.
func Reexec() {
	if len(os.Args) < 2 {
		return
	}
	switch os.Args[1] {
	case initArg:
		libcontainer.Init() // does not return
	case pauseArg:
		os.Exit(pause())
	}
}

// pause is the sandbox holder: it runs in the pod's new network, IPC and
// UTS namespaces, sets the hostname (os.Args[2]), brings up lo, reports
// "ok" on stdout, and sleeps until SIGTERM or SIGINT. As PID 1 of a
// pod's shared PID namespace it also reaps the orphans the kernel gives it.
//
// In binaries built with cgo (every binary that can run containers: the
// nsenter package needs it) a C constructor in pause_cgo.go does all this
// before the Go runtime starts, so this is reached only without cgo. The
// C version is what runs: it spares each pod booting the Go runtime and
// running every package's init of a large binary.
func pause() int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGHUP, syscall.SIGPIPE)
	if len(os.Args) > 2 {
		if err := unix.Sethostname([]byte(os.Args[2])); err != nil {
			fmt.Fprintln(os.Stdout, "sethostname:", err)
			return 1
		}
	}
	if err := loopbackUp(); err != nil {
		fmt.Fprintln(os.Stdout, "bring up lo:", err)
		return 1
	}
	fmt.Fprintln(os.Stdout, "ok")
	os.Stdout.Close()
	if os.Getpid() != 1 {
		<-sigs
		return 0
	}
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	for {
		select {
		case <-sigs:
			return 0
		case <-chld:
			for {
				pid, err := unix.Wait4(-1, nil, unix.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}

// loopbackUp sets IFF_UP on lo in the current network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set flags: %w", err)
	}
	return nil
}
