package fleet

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sluicehq/sluice/nodelet/runtime"
	"github.com/sluicehq/sluice/nodelet/runtime/sim"
)

// PodLog is the line format of Config.PodLog: one line per pod start and
// per pod end, written when it happens, times in Unix nanoseconds.
//
//	start <unix-ns> <node> <pod-id>
//	end <unix-ns> <node> <pod-id> <exit-code>
//
// A pod ID is nodelet/remote.PodID of its task's attempt ("j12.0.5.1":
// job 12, group 0, task 5, attempt 1).
const PodLog = "start|end <unix-ns> <node> <pod-id> [<exit-code>]"

// podWriter writes the lines of PodLog to w, one Write per line, so that
// lines written before the process dies are whole.
type podWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *podWriter) line(format string, args ...any) {
	b := fmt.Appendf(nil, format, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = p.w.Write(b)
}

// loggedRuntime is a node's sim runtime that writes each pod's start and
// end to a podWriter. The sim runtime's other methods (Notify, Immediate,
// Spec, ...) are its own.
type loggedRuntime struct {
	*sim.Runtime
	node string
	log  *podWriter
}

func (r *loggedRuntime) Start(ctx context.Context, spec runtime.PodSpec) error {
	if err := r.Runtime.Start(ctx, spec); err != nil {
		return err
	}
	r.log.line("start %d %s %s\n", time.Now().UnixNano(), r.node, spec.ID)
	id := spec.ID
	// The sim runtime calls every Notify callback of a pod when it ends.
	// Notify of a pod just started fails only once the runtime is
	// closed, when the fleet stops: its pods' ends are then not logged.
	_ = r.Runtime.Notify(id, func(e runtime.Exit) {
		r.log.line("end %d %s %s %d\n", time.Now().UnixNano(), r.node, id, e.Code)
	})
	return nil
}
