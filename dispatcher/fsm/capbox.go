package fsm

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Errors of the capbox commands; each rejects its command whole.
var (
	// ErrNotAppmaster: capboxes were asked for by a job that is not an
	// appmaster (api.JobSpec.Appmaster).
	ErrNotAppmaster = errors.New("fsm: job is not an appmaster")
	// ErrAppmasterDone: the appmaster was cancelled or has ended, so it
	// may lease nothing more.
	ErrAppmasterDone = errors.New("fsm: appmaster has ended")
	// ErrNotCapbox: a release names a task that is not a capbox.
	ErrNotCapbox = errors.New("fsm: not a capbox")
)

// A capbox request is kept as a capbox set: a job of its own (its ID is a
// job ID) whose one group holds the request's Count capboxes as tasks, so
// that rounds, plans, targets, reports and node failures treat capboxes
// as they treat tasks. Its spec is derived from the request and its
// appmaster's spec (capboxSetSpec); its tasks never retry and are never
// preempted, and a capbox's ID is the ID of its task's only attempt.

// capboxContainer names the container of a capbox set's derived pod spec.
const capboxContainer = "capbox"

// capboxSetSpec derives a capbox set's spec from its appmaster's spec and
// the request: the queue, pool, priority and QoS are the appmaster's.
func capboxSetSpec(am *api.JobSpec, r *api.CapboxRequest) *api.JobSpec {
	return &api.JobSpec{
		Name: r.Name, Queue: am.Queue, Pool: am.Pool, Priority: am.Priority, QoS: am.QoS,
		Constraints: r.Constraints, DistinctNodes: r.DistinctNodes, IdempotencyKey: r.IdempotencyKey,
		Retry: api.RetryPolicy{MaxAttempts: 1, Backoff: api.DefaultBackoff, MaxBackoff: api.DefaultMaxBackoff},
		Tasks: []api.TaskGroupSpec{{
			Name: r.Name, Count: r.Count, PreferredNodes: r.PreferredNodes,
			Pod: api.PodSpec{Containers: []api.ContainerSpec{{Name: capboxContainer, Resources: r.Resources}}},
		}},
	}
}

// newCapboxSet returns the capbox set of request r (defaulted and valid)
// for appmaster am, numbered num.
func newCapboxSet(am *job, num uint64, r *api.CapboxRequest, reqJSON []byte, now int64) *job {
	s := &job{num: num, id: jobID(num), submitted: now, link: &capboxLink{owner: am, request: reqJSON}, gang: r.AllOrNothing}
	s.setSpec(capboxSetSpec(am.specOf(), r))
	initGroups(s)
	if am.link == nil {
		am.link = &capboxLink{}
	}
	am.link.sets = append(am.link.sets, s)
	return s
}

// capboxIdemKey scopes a capbox request's idempotency key to its appmaster.
func capboxIdemKey(am *job, key string) string { return am.id + "/" + key }

// CreateCapboxes returns the command by which appmaster (a job ID) asks
// for capboxes, one capbox set per request. The requests get their
// defaults and are validated as api.DecodeCapboxRequests does; any
// problem rejects the command whole with an *api.ValidationError. The
// appmaster must be a job with api.JobSpec.Appmaster set (ErrNotAppmaster)
// that has not ended (ErrAppmasterDone). A request whose idempotency key
// this appmaster used before is answered with the first set's ID. The
// result decodes with DecodeSubmitResult: one capbox set ID per request.
func CreateCapboxes(now time.Time, appmaster string, reqs []api.CapboxRequest) ([]byte, error) {
	body, err := json.Marshal(reqs)
	if err != nil {
		return nil, fmt.Errorf("fsm: encoding capbox requests: %w", err)
	}
	return appmasterCommand(cmdCreateCapboxes, now, appmaster, body), nil
}

// appmasterCommand encodes a command of an appmaster's with a JSON body.
func appmasterCommand(tag byte, now time.Time, appmaster string, body []byte) []byte {
	e := newCommand(tag, now, len(appmaster)+len(body)+8)
	e.str(appmaster)
	e.bytes(body)
	return e.b
}

// appmasterIDsCommand encodes a command of an appmaster's naming IDs.
func appmasterIDsCommand(tag byte, now time.Time, appmaster string, ids []string) []byte {
	e := newCommand(tag, now, len(appmaster)+len(ids)*24+8)
	e.str(appmaster)
	e.uvarint(uint64(len(ids)))
	for _, id := range ids {
		e.str(id)
	}
	return e.b
}

// ReleaseCapboxes returns the command by which appmaster (a job ID)
// releases capboxes, named by ID: a pending one is dropped, an active one
// leaves its node's target and frees its resources when its node reports
// it stopped; one already released or ended is left as it is. Every ID
// must name a capbox of one of the appmaster's sets (ErrNotFound,
// ErrNotCapbox), or the command is rejected whole. The result decodes with
// DecodeCancelResult.
func ReleaseCapboxes(now time.Time, appmaster string, ids []string) []byte {
	return appmasterIDsCommand(cmdReleaseCapboxes, now, appmaster, ids)
}

// appmasterLocked returns the live appmaster job id names.
func (f *FSM) appmasterLocked(id string) (*job, error) {
	num, ok := parseJobID(id)
	am := f.mu.jobs.get(num)
	switch {
	case !ok || am == nil:
		return nil, fmt.Errorf("%w: job %q", ErrNotFound, id)
	case !am.appmaster:
		return nil, fmt.Errorf("%w: %s", ErrNotAppmaster, id)
	case am.state() >= JobSucceeded:
		return nil, fmt.Errorf("%w: %s is %s", ErrAppmasterDone, id, am.state())
	}
	return am, nil
}

func (f *FSM) createCapboxesLocked(w writer, now int64, d *dec) ([]byte, error) {
	id, body := d.str(), d.bytes()
	if err := d.done("create capboxes command"); err != nil {
		return nil, err
	}
	am, err := f.appmasterLocked(id)
	if err != nil {
		return nil, fmt.Errorf("fsm: create capboxes: %w", err)
	}
	reqs, err := api.DecodeCapboxRequests(body)
	if err != nil {
		return nil, fmt.Errorf("fsm: create capboxes: %w", err)
	}
	// Nothing below can fail.
	res := SubmitResult{Jobs: make([]SubmittedJob, len(reqs))}
	for i := range reqs {
		r := &reqs[i]
		if k := r.IdempotencyKey; k != "" {
			if num, ok := f.mu.idem[capboxIdemKey(am, k)]; ok {
				res.Jobs[i] = SubmittedJob{ID: jobID(num), Existing: true}
				continue
			}
		}
		num := f.mu.nextJob
		f.mu.nextJob++
		reqJSON, _ := json.Marshal(r) // a decoded request always encodes
		s := newCapboxSet(am, num, r, reqJSON, now)
		f.mu.jobs.put(s)
		f.mu.anySets = true
		f.touchGroup(s.groups[0])
		f.writeJobLocked(w, s)
		if k := r.IdempotencyKey; k != "" {
			k = capboxIdemKey(am, k)
			f.mu.idem[k] = num
			s.idem = k
			w.Set(idemKey(k), binary.BigEndian.AppendUint64(nil, num))
		}
		res.Jobs[i] = SubmittedJob{ID: s.id}
	}
	w.Set(keyJobSeq, binary.BigEndian.AppendUint64(nil, f.mu.nextJob))
	return res.encode(), nil
}

// writeJobLocked writes j's record: a capbox set's or a job's.
func (f *FSM) writeJobLocked(w writer, j *job) {
	if j.owner() != nil {
		w.Set(capboxSetKey(j.num), encodeCapboxSet(j))
		return
	}
	f.vbuf = encodeJob(f.vbuf, j)
	w.Set(jobKey(j.num), f.vbuf)
}

func (f *FSM) releaseCapboxesLocked(w writer, now int64, d *dec) ([]byte, error) {
	am := d.str()
	ids := make([]string, d.count(1))
	for i := range ids {
		ids[i] = d.str()
	}
	if err := d.done("release capboxes command"); err != nil {
		return nil, err
	}
	keys := make([]taskKey, len(ids))
	for i, id := range ids {
		k, attempt, ok := parseTaskID(id)
		s := f.mu.jobs.get(k.job)
		switch {
		case !ok || s == nil:
			return nil, fmt.Errorf("fsm: release capboxes: %w: capbox %q", ErrNotFound, id)
		case s.owner() == nil:
			return nil, fmt.Errorf("fsm: release capboxes: %w: %s is a task of job %s", ErrNotCapbox, id, s.id)
		case s.owner().id != am:
			return nil, fmt.Errorf("fsm: release capboxes: %w: capbox %s is appmaster %s's, not %s's", ErrNotFound, id, s.owner().id, am)
		case k.group != 0 || int64(k.index) >= s.groups[0].count || attempt != 1:
			return nil, fmt.Errorf("fsm: release capboxes: %w: capbox set %s has no capbox %q", ErrNotFound, s.id, id)
		}
		keys[i] = k
	}
	// Nothing below can fail.
	var res CancelResult
	for _, k := range keys {
		s := f.mu.jobs.get(k.job)
		if s.cancelled {
			continue
		}
		g := s.groups[0]
		if int64(k.index) >= g.next {
			f.materializeLocked(g, k.index)
		}
		t := g.tasks[k.index]
		switch {
		case t.attempt == 0 && !t.closed:
			// Pending: waiting in the requeue list.
			g.requeue = slices.DeleteFunc(g.requeue, func(r requeued) bool { return r.index == k.index })
			f.dropLocked(g, t, now)
			res.Dropped++
		case t.active() && !t.stop:
			f.stopTaskLocked(w, s, t, now)
			res.Stopping++
		}
	}
	return encodeUvarints(uint64(res.Dropped), uint64(res.Stopping)), nil
}

// materializeLocked gives the never-placed tasks of g up to index records:
// they move from the fresh range to the requeue list (eligible at once),
// so that one of them can be dropped alone. Placed-task records stay a
// prefix of the group's indexes.
func (f *FSM) materializeLocked(g *group, index uint32) {
	fresh := make([]task, int64(index)+1-g.next)
	for i := range fresh {
		t := &fresh[i]
		t.key = taskKey{g.job.num, g.idx, uint32(g.next)}
		t.state = api.TaskPending
		g.next++
		g.tasks = append(g.tasks, t)
		g.requeue = append(g.requeue, requeued{index: t.key.index})
		f.writeTask(t)
	}
	f.touchGroup(g)
}

// dropLocked ends a pending capbox (out of the requeue list already) as
// released.
func (f *FSM) dropLocked(g *group, t *task, now int64) {
	t.state, t.reason, t.closed, t.updated = api.TaskKilled, api.ReasonStopped, true, now
	g.killed++
	f.touchGroup(g)
	f.writeTask(t)
}

// endAppmastersLocked releases the capbox sets of the appmasters that the
// command being applied ended (all their tasks done), before the command's
// changes are flushed.
func (f *FSM) endAppmastersLocked(w writer, now int64) {
	if !f.mu.anySets {
		return // no appmaster has capboxes: nothing to look for
	}
	var ended []*job
	for _, g := range f.dirtyGroups {
		if j := g.job; len(j.sets()) > 0 && !j.cancelled && j.state() >= JobSucceeded && !slices.Contains(ended, j) {
			ended = append(ended, j)
		}
	}
	slices.SortFunc(ended, func(a, b *job) int { return cmp.Compare(a.num, b.num) })
	for _, am := range ended {
		for _, s := range am.sets() {
			f.cancelJobLocked(w, now, s)
		}
	}
}

// capboxState derives the state of capbox index i of set s.
func capboxState(s *job, i int64) (api.CapboxState, *task) {
	g := s.groups[0]
	if i >= int64(len(g.tasks)) {
		if s.cancelled {
			return api.CapboxReleased, nil
		}
		return api.CapboxPending, nil
	}
	t := g.tasks[i]
	switch t.state {
	case api.TaskPending:
		if t.closed {
			return api.CapboxReleased, t
		}
		return api.CapboxPending, t
	case api.TaskAssigned:
		return api.CapboxAssigned, t
	case api.TaskStarting:
		return api.CapboxStarting, t
	case api.TaskRunning:
		return api.CapboxRunning, t
	case api.TaskKilled:
		return api.CapboxReleased, t
	case api.TaskLost:
		return api.CapboxLost, t
	}
	// Succeeded or failed: the placeholder ended on its own.
	return api.CapboxFailed, t
}

// CapboxInfo is one capbox as the FSM knows it.
type CapboxInfo struct {
	ID string // the capbox's ID: its task's only attempt
	// Set is the capbox set's ID, Request its request's name.
	Set, Request string
	State        api.CapboxState
	Node         string // the node it is or was on; "" while pending
	Resources    api.Resources
	Reason       api.TaskReason
	ExitCode     int32
	Updated      time.Time
	// Tasks are the tasks started in it, by name.
	Tasks []api.CapTaskStatus
}

// Capboxes returns the capboxes of appmaster (a job ID), by set and
// index, and an index they are current as of (the last one all of whose
// commands are applied): a change after it is a change of the capbox
// set's job after it, which a watch feed (the change sets' Jobs) names, so
// a watcher from it misses none. ok is false
// when no such job exists.
func (f *FSM) Capboxes(appmaster string) (boxes []CapboxInfo, index uint64, ok bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	num, ok := parseJobID(appmaster)
	am := f.mu.jobs.get(num)
	if !ok || am == nil {
		return nil, 0, false
	}
	for _, s := range am.sets() {
		res := s.groups[0].podSpec().Containers[0].Resources
		for i := range s.groups[0].count {
			st, t := capboxState(s, i)
			b := CapboxInfo{ID: taskID(taskKey{s.num, 0, uint32(i)}, 1), Set: s.id, Request: s.specOf().Name, State: st,
				Resources: res, Updated: time.Unix(0, s.submitted).UTC()}
			if t != nil {
				b.Node, b.Reason, b.ExitCode, b.Updated = t.node, t.reason, t.exitCode, time.Unix(0, t.updated).UTC()
				b.Tasks = f.capTaskStatusesLocked(t.key)
			}
			boxes = append(boxes, b)
		}
	}
	return boxes, f.mu.complete, true
}

// capboxSetKey is a capbox set's record key.
func capboxSetKey(num uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefixCapboxSet), num)
}

// encodeCapboxSet encodes a capbox set's record: its submit time, whether
// it was released whole, its appmaster's number and its request as JSON
// (defaults applied).
func encodeCapboxSet(s *job) []byte {
	e := enc{b: make([]byte, 0, len(s.link.request)+24)}
	e.byte(recordVersion)
	e.varint(s.submitted)
	e.bool(s.cancelled)
	e.uvarint(s.owner().num)
	e.bytes(s.link.request)
	return e.b
}

// loadCapboxSetLocked decodes a capbox set's record; its appmaster must be
// loaded.
func (f *FSM) loadCapboxSetLocked(num uint64, b []byte) error {
	d := dec{b: b}
	if v := d.byte(); v != recordVersion {
		return fmt.Errorf("%w: capbox set %d record version %d", ErrCorrupt, num, v)
	}
	submitted, cancelled, owner, reqJSON := d.varint(), d.bool(), d.uvarint(), d.bytes()
	if err := d.done("capbox set record"); err != nil {
		return fmt.Errorf("capbox set %d: %w", num, err)
	}
	am := f.mu.jobs.get(owner)
	if am == nil || !am.appmaster {
		return fmt.Errorf("%w: capbox set %d of j%d, not a loaded appmaster", ErrCorrupt, num, owner)
	}
	reqs, err := api.DecodeCapboxRequests(reqJSON)
	if err != nil || len(reqs) != 1 {
		return fmt.Errorf("%w: capbox set %d request: %v", ErrCorrupt, num, err)
	}
	s := newCapboxSet(am, num, &reqs[0], slices.Clone(reqJSON), submitted)
	s.cancelled = cancelled
	f.mu.jobs.put(s)
	f.mu.anySets = true
	return nil
}
