package runtime

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Errors callers act on. Runtimes wrap them with context; test with
// errors.Is.
var (
	// ErrNotFound: no pod (or container) with that ID exists.
	ErrNotFound = errors.New("runtime: pod not found")
	// ErrExists: a pod with that ID already exists.
	ErrExists = errors.New("runtime: pod already exists")
	// ErrBadSpec: the spec cannot run; the error is a *SpecError naming
	// the fields.
	ErrBadSpec = errors.New("runtime: bad pod spec")
	// ErrImageDenied: an image path of the spec is not below one of the
	// host's image roots (after symbolic links), or is the host's root.
	// The error is also an ErrBadSpec one, naming the field.
	ErrImageDenied = errors.New("runtime: image denied")
	// ErrRunning: the operation needs an ended pod.
	ErrRunning = errors.New("runtime: pod is running")
	// ErrClosed: the Runtime value was closed.
	ErrClosed = errors.New("runtime: closed")
	// ErrExitUnknown is Exit.Err of a pod that ended while no Runtime
	// was watching it, so its exit status was lost.
	ErrExitUnknown = errors.New("runtime: pod ended while unobserved; exit status unknown")
)

// Runtime runs pods on one host. All methods are safe for concurrent use.
type Runtime interface {
	// Start creates the pod and starts all of its containers. It returns
	// once they run, or with an error and nothing left behind. A spec
	// that cannot run is an ErrBadSpec error; a pod ID in use,
	// ErrExists. Start does not change what spec's slices and pointers
	// refer to, and may keep it: the caller must not change it after
	// the call.
	Start(ctx context.Context, spec PodSpec) error
	// Wait blocks until the pod has ended, or ctx is done, and returns
	// how it ended. Every call for a pod returns the same Exit.
	Wait(ctx context.Context, id string) (Exit, error)
	// Stop ends the pod: SIGTERM to every container, then SIGKILL to
	// what still runs after grace. It returns when the pod has ended.
	// Stopping an ended pod does nothing.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Remove deletes an ended pod: its state, cgroups and logs. Removing
	// a running pod is an ErrRunning error.
	Remove(ctx context.Context, id string) error
	// List reports every pod on the host, running or ended and not yet
	// removed, including pods started by an earlier Runtime value, sorted
	// by ID.
	List(ctx context.Context) ([]PodStatus, error)
	// Logs reads a container's output (stdout and stderr, interleaved as
	// written). With opts.Follow the reader blocks for more output until
	// the container ends or ctx is done.
	Logs(ctx context.Context, id, container string, opts LogOptions) (io.ReadCloser, error)
	// Close releases this value: it stops watching pods but leaves them
	// running. Calls after Close fail with ErrClosed.
	Close() error
}

// Notifier is a Runtime that tells of a pod's end by calling back, so that
// its caller keeps no goroutine blocked in Wait per pod. The simulated
// runtime, whose pods end by timers, is one: an agent that simulates
// thousands of pods would otherwise keep a goroutine parked for each.
type Notifier interface {
	// Notify calls fn once with how the pod ended, as Wait would return
	// it, from a goroutine of the runtime's, once the pod has ended (at
	// once if it has). fn must not wait on the runtime. Notify returns an
	// ErrNotFound error for a pod it does not have.
	Notify(id string, fn func(Exit)) error
}

// Immediate is a Runtime whose Start and Remove return at once: they do
// not wait on a process, an image or the disk. The agent calls them from
// its own loop rather than from a goroutine per call. The simulated runtime
// is one: an agent simulating hundreds of pods started and removed a second
// spent a fifth of its time making goroutines and passing their events
// back.
type Immediate interface {
	// Immediate marks the runtime; it does nothing.
	Immediate()
}

// Meter is a Runtime that reports what its pods use by itself, where no
// cgroup is there to measure: the simulated runtime, whose pods use what
// their SimSpec says. The agent reports it in its heartbeats as it reports
// an overcommit loop's measurements of real pods (nodelet.Config.
// RuntimeUsage).
type Meter interface {
	// Usage returns what pod id uses at now: CPU in millicores, memory
	// in bytes. ok is false for a pod the runtime does not have, or that
	// has ended.
	Usage(id string, now time.Time) (u api.Usage, ok bool)
}

// LogOptions says how Logs reads.
type LogOptions struct {
	// Follow keeps the reader open, returning new output as it is
	// written, until the container ends.
	Follow bool
}

// State is where a pod is in its life.
type State uint8

// Pod states.
const (
	StateRunning State = iota + 1
	StateExited
)

func (s State) String() string {
	switch s {
	case StateRunning:
		return "running"
	case StateExited:
		return "exited"
	}
	return "unknown"
}

// PodStatus is what List reports of one pod.
type PodStatus struct {
	ID           string
	Generation   int64
	CgroupParent string
	State        State
	StartedAt    time.Time
	// FinishedAt is zero while the pod runs, and may be only an upper
	// bound for a pod that ended while unobserved.
	FinishedAt time.Time
	// Exit is set once State is StateExited.
	Exit *Exit
}

// Exit is how a pod ended.
type Exit struct {
	// Code is the exit code of the pod's first container: its exit
	// status, or 128+signal if a signal killed it. -1 when unknown.
	Code int
	// OOMKilled is true if the kernel's OOM killer killed a process of
	// any container of the pod.
	OOMKilled bool
	// Containers has each container's own exit, in spec order.
	Containers []ContainerExit
	// ScratchFull names the pod's scratch volumes that were full (or
	// nearly) when it ended, so that a failure can be put down to them;
	// empty normally.
	ScratchFull []string
	// Err is why the exit is incomplete or the pod failed around its
	// processes (for example ErrExitUnknown), nil normally.
	Err error
}

// ContainerExit is how one container ended.
type ContainerExit struct {
	Name      string
	Code      int
	OOMKilled bool
}
