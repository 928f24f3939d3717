package fsm

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
)

// cmdSetQueue sets a queue's weight and caps (SetQueue).
const cmdSetQueue byte = 18

// prefixQueue holds each queue's settings, under its name.
const prefixQueue = "q/"

// SetQueue returns the command that sets a queue's settings, replacing
// the ones it had: its caps (placement keeps the queue's active tasks
// under them from the next round on; lowering one stops nothing) and its
// fair-share weight (0 leaves it to the dispatcher's configuration).
// Settings all zero remove the queue's. A bad name or settings return no
// command and an error naming every problem.
func SetQueue(now time.Time, name string, s api.QueueSettings) ([]byte, error) {
	var errs []string
	if err := api.CheckName(name); err != nil {
		errs = append(errs, "name: "+err.Error())
	}
	if err := s.Validate(); err != nil {
		errs = append(errs, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("fsm: set queue %q: %s", name, strings.Join(errs, "; "))
	}
	e := newCommand(cmdSetQueue, now, len(name)+24)
	e.str(name)
	appendQueueSettings(e, s)
	return e.b, nil
}

func appendQueueSettings(e *enc, s api.QueueSettings) {
	e.varint(s.Weight)
	e.varint(s.Caps.CPU)
	e.varint(s.Caps.Memory)
	e.varint(s.Caps.GPUs)
	e.varint(s.Caps.Tasks)
}

func decodeQueueSettings(d *dec) api.QueueSettings {
	var s api.QueueSettings
	s.Weight = d.varint()
	s.Caps.CPU, s.Caps.Memory, s.Caps.GPUs, s.Caps.Tasks = d.varint(), d.varint(), d.varint(), d.varint()
	return s
}

// setQueueLocked applies a SetQueue command. Its settings were validated
// when it was made; a record that does not validate is corrupt.
func (f *FSM) setQueueLocked(w writer, d *dec) ([]byte, error) {
	name := strings.Clone(d.str())
	s := decodeQueueSettings(d)
	if err := d.done("set queue command"); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil || api.CheckName(name) != nil {
		return nil, fmt.Errorf("%w: set queue %q: %+v", ErrCorrupt, name, s)
	}
	key := []byte(prefixQueue + name)
	if s == (api.QueueSettings{}) {
		delete(f.mu.queues, name)
		w.Delete(key)
		return nil, nil
	}
	f.mu.queues[name] = s
	e := enc{b: []byte{recordVersion}}
	appendQueueSettings(&e, s)
	w.Set(key, e.b)
	return nil, nil
}

// quotaShortfallLocked says how k more tasks of demand d would take queue
// past one of its caps, or returns "": a plan computed before the caps
// were lowered is held to them when it commits.
func (f *FSM) quotaShortfallLocked(queue string, d api.Capacity, k int64) string {
	s, ok := f.mu.queues[queue]
	if !ok || !s.Caps.Capped() {
		return ""
	}
	used, tasks := f.mu.queueUsed[queue], f.mu.queueTasks[queue]
	for _, c := range []struct {
		dim            string
		limit, have, p int64
	}{{"cpu", s.Caps.CPU, used.CPU, d.CPU}, {"memory", s.Caps.Memory, used.Memory, d.Memory},
		{"gpus", s.Caps.GPUs, used.GPUs, d.GPUs}, {"tasks", s.Caps.Tasks, tasks, 1}} {
		if c.limit > 0 && c.p > 0 && c.have+k*c.p > c.limit {
			return fmt.Sprintf("queue %s: %d tasks take its %s to %d, over its cap of %d", queue, k, c.dim, c.have+k*c.p, c.limit)
		}
	}
	return ""
}

// loadQueueLocked loads a queue's settings record.
func (f *FSM) loadQueueLocked(k, v []byte) error {
	name := string(k[len(prefixQueue):])
	if len(v) < 1 || v[0] != recordVersion {
		return fmt.Errorf("%w: queue record %q", ErrCorrupt, name)
	}
	d := dec{b: v[1:]}
	s := decodeQueueSettings(&d)
	if err := d.done("queue record"); err != nil {
		return err
	}
	if err := s.Validate(); err != nil || api.CheckName(name) != nil {
		return fmt.Errorf("%w: queue record %q: %+v", ErrCorrupt, name, s)
	}
	f.mu.queues[name] = s
	return nil
}

// Queues lists every queue with settings, active or pending tasks, by
// name.
func (f *FSM) Queues() []api.QueueStatus {
	f.mu.RLock()
	defer f.mu.RUnlock()
	pending := map[string]int64{}
	for i := range f.mu.pending.gs.len() {
		g := *f.mu.pending.gs.at(i)
		pending[g.job.queue] += g.pending()
	}
	names := map[string]bool{}
	for name := range f.mu.queues {
		names[name] = true
	}
	for name := range f.mu.queueUsed {
		names[name] = true
	}
	for name := range pending {
		names[name] = true
	}
	out := make([]api.QueueStatus, 0, len(names))
	for _, name := range slices.Sorted(maps.Keys(names)) {
		out = append(out, api.QueueStatus{Name: name, QueueSettings: f.mu.queues[name], Running: f.mu.queueUsed[name],
			Tasks: f.mu.queueTasks[name], Pending: pending[name]})
	}
	return out
}
