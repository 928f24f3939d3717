package api

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"unsafe"
)

// DecodeJobs reads a submission body: one job object, a JSON array of jobs,
// or NDJSON (one job object per line). It applies defaults and validates every
// job, and returns either all the jobs or an error that names every problem:
// a *ValidationError (wrapping ErrInvalid) listing each by item index and
// field path, or an error wrapping ErrTooLarge. Unknown fields, duplicate
// keys, wrong types and trailing data are problems.
func DecodeJobs(body []byte) ([]JobSpec, error) {
	return decodeItems(body, "jobs", decodeJobSpec, func(c *checker, j *JobSpec) {
		j.setDefaults()
		j.validate(c)
	})
}

// A JobArena is memory for reading submission bodies, reused from one body
// to the next: a server reading thousands of jobs a request would
// otherwise allocate, and its collector reclaim, about 800 bytes a job.
// The zero value is ready to use; a JobArena is not safe for concurrent
// use.
type JobArena struct {
	jobs       []JobSpec
	groups     slab[TaskGroupSpec]
	containers slab[ContainerSpec]
	strings    slab[string]
}

// DecodeUnvalidated reads a submission body as DecodeJobs does and applies
// defaults, but does not validate the jobs: it is for a caller that hands
// them to something that validates them anyway (the dispatcher's submit
// validates every job before it proposes any), and so checks them once.
// Its error names only the problems of reading the body; a caller that
// wants every problem named runs DecodeJobs when it fails.
//
// The jobs live in a's memory and share body's, where DecodeJobs's have
// their own and share a copy of the body: they are valid until the next
// call on a, and while body is unchanged (a request handler's jobs, used
// only while it runs, save a copy of every body and, with a pool of
// arenas, the memory of every job).
func (a *JobArena) DecodeUnvalidated(body []byte) ([]JobSpec, error) {
	if err := checkBodySize(body); err != nil {
		return nil, err
	}
	d := decoders.Get().(*decoder)
	defer d.release()
	d.resetShared(body)
	chunk := d.groups.chunk
	a.groups.rewind(chunk)
	a.containers.rewind(chunk)
	a.strings.rewind(4 * chunk)
	d.groups, d.containers, d.strings = a.groups, a.containers, a.strings
	jobs, err := decodeItemsWith(d, body, "jobs", a.jobs[:0], decodeJobSpec, func(_ *checker, j *JobSpec) { j.setDefaults() })
	a.groups, a.containers, a.strings = d.groups, d.containers, d.strings
	if jobs != nil {
		a.jobs = jobs
	}
	return jobs, err
}

// DecodeCapboxRequests reads capbox requests as DecodeJobs reads jobs.
func DecodeCapboxRequests(body []byte) ([]CapboxRequest, error) {
	return decodeItems(body, "capboxes", decodeCapboxRequest, func(c *checker, r *CapboxRequest) {
		r.SetDefaults()
		r.validate(c)
	})
}

// DecodeCapTasks reads capbox tasks as DecodeJobs reads jobs.
func DecodeCapTasks(body []byte) ([]CapTaskSpec, error) {
	return decodeItems(body, "tasks", decodeCapTaskSpec, func(c *checker, t *CapTaskSpec) {
		t.SetDefaults()
		t.validate(c)
	})
}

func decodeItems[T any](body []byte, name string, dec func(*decoder, *T), check func(*checker, *T)) ([]T, error) {
	if err := checkBodySize(body); err != nil {
		return nil, err
	}
	d := decoders.Get().(*decoder)
	defer d.release()
	d.reset(body)
	return decodeItemsWith(d, body, name, nil, dec, check)
}

// checkBodySize rejects a body over MaxBodyBytes, before anything reads it.
func checkBodySize(body []byte) error {
	if len(body) > MaxBodyBytes {
		return fmt.Errorf("%w: body is %d bytes, more than the limit of %d", ErrTooLarge, len(body), MaxBodyBytes)
	}
	return nil
}

// decodeItemsWith is decodeItems with d, reset to body, a body of at most
// MaxBodyBytes, appending the items to items, which is empty (nil, or
// memory to reuse).
func decodeItemsWith[T any](d *decoder, body []byte, name string, items []T, dec func(*decoder, *T), check func(*checker, *T)) ([]T, error) {
	if d.peek() == '{' {
		items = slices.Grow(items, min(bytes.Count(body, []byte{'\n'})+1, MaxItemsPerRequest))
	}
	one := func() bool {
		if len(items) == MaxItemsPerRequest {
			return false
		}
		d.item = len(items)
		d.itemStart = len(d.probs)
		d.push(name)
		d.pushIndex(d.item)
		items = append(items, *new(T))
		it := &items[len(items)-1]
		if c := d.peek(); c != '{' {
			d.skipValue()
			if !d.broken {
				d.addf("want an object, got %s", kind(c))
			}
		} else if dec(d, it); !d.broken {
			check(&d.checker, it)
		}
		d.path = d.path[:0]
		d.item = -1
		return true
	}
	switch c := d.peek(); c {
	case '[':
		d.pos++
		for i := 0; !d.broken; i++ {
			c := d.peek()
			if c == ']' && i == 0 {
				// As an empty body: a request of nothing is a mistake.
				d.pos++
				d.add("empty array: want at least one of " + name)
				break
			}
			if i > 0 {
				if c == ']' {
					d.pos++
					break
				}
				if c != ',' {
					d.syntax("want ',' or ']' after %s[%d], got %s", name, i-1, quoteByte(c))
					break
				}
				d.pos++
				if d.peek() == ']' {
					d.syntax("want a value after ',', got ']'")
					break
				}
			}
			start := d.pos
			if !one() {
				return nil, tooMany(name)
			}
			if i == 0 {
				items = slices.Grow(items, d.moreItems(start))
			}
		}
		if !d.broken && d.peek() != 0 {
			d.syntax("trailing data after the array")
		}
	case '{':
		for !d.broken {
			if !one() {
				return nil, tooMany(name)
			}
			if d.broken {
				break
			}
			newline := false
			for d.pos < len(d.input) && isSpace(d.input[d.pos]) {
				newline = newline || d.input[d.pos] == '\n'
				d.pos++
			}
			if d.pos == len(d.input) {
				break
			}
			if !newline {
				d.syntax("trailing data after %s[%d] (NDJSON items go one per line)", name, len(items)-1)
			}
		}
	case 0:
		d.add(fmt.Sprintf("empty body: want one object, an array of %s, or NDJSON", name))
	default:
		d.syntax("want one object, an array of %s, or NDJSON; got %s", name, kind(c))
	}
	if err := d.err(); err != nil {
		return nil, err
	}
	return items, nil
}

// intern returns the one of common equal to s, or s: a job keeps no
// reference to the request body for the values most jobs share.
func intern(s string, common ...string) string {
	for _, c := range common {
		if s == c {
			return c
		}
	}
	return s
}

// decoders keeps decoders, with their path and scratch buffers, between
// requests.
var decoders = sync.Pool{New: func() any { return &decoder{checker: checker{path: make([]seg, 0, 16)}} }}

// reset readies d to read body.
func (d *decoder) reset(body []byte) {
	d.resetShared(body)
	d.text = string(body)
}

// resetShared is reset without copying body: the strings decoded share its
// memory.
func (d *decoder) resetShared(body []byte) {
	d.checker = checker{input: body, item: -1, path: d.path[:0]}
	d.text = unsafe.String(unsafe.SliceData(body), len(body))
	d.pos, d.broken, d.lenient, d.lastNum = 0, false, false, 0
	d.lastPod = podMemo{}
	d.scratch = d.scratch[:0]
	// A typical job is 200-300 bytes; size chunks so that a small request
	// allocates little and a bulk one allocates rarely.
	chunk := min(max(len(body)/256, 1), maxSlabChunk)
	d.groups, d.containers, d.strings = newSlab[TaskGroupSpec](chunk), newSlab[ContainerSpec](chunk), newSlab[string](4*chunk)
}

// release returns d to the pool without references to the request.
func (d *decoder) release() {
	d.checker = checker{path: d.path[:0]}
	d.text = ""
	d.lastPod = podMemo{}
	d.groups, d.containers, d.strings = slab[TaskGroupSpec]{}, slab[ContainerSpec]{}, slab[string]{}
	if cap(d.scratch) > 64<<10 {
		d.scratch = nil
	}
	decoders.Put(d)
}

// minItemBytes is the fewest bytes an item of a request takes ("{}" and a
// comma): it bounds itemsGuess by the body's size.
const minItemBytes = 3

// itemsGuess guesses, for sizing the slice that receives them, how many
// more items the rest of a JSON array holds when its first item took size
// bytes: bulk requests are mostly alike, and a wrong guess only costs an
// append's copy or some spare room. It is bounded by the rest's size and by
// MaxItemsPerRequest.
func itemsGuess(rest, size int) int {
	return min(rest/(size+1), rest/minItemBytes, MaxItemsPerRequest-1)
}

// moreItems is itemsGuess for the array item that began at start and ends
// at d's position, with the rest of the input after it.
func (d *decoder) moreItems(start int) int {
	return itemsGuess(len(d.input)-d.pos, d.pos-start)
}

func tooMany(name string) error {
	return fmt.Errorf("%w: more than %d %s in one request", ErrTooLarge, MaxItemsPerRequest, name)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// DecodeNodeTarget reads a node's target as the dispatcher writes it (the
// reply of GET /v1/nodes/{name}/target): strictly, as DecodeJobs reads job
// specs (an unknown or repeated field or a wrong type is an error naming
// its path), and without reflection, since every nodelet reads one per
// change of its pods. Generations of 2^63 or more are refused. Pods whose
// specs have the same text share one decoded spec: treat specs as read-only.
func DecodeNodeTarget(body []byte) (NodeTarget, error) {
	return decodeOne(body, "target", decodeNodeTarget)
}

// decodeOwnedNodeTarget is DecodeNodeTarget of a body the caller gives up
// (a reply's own copy): the target's strings share its memory.
func decodeOwnedNodeTarget(body []byte) (NodeTarget, error) {
	return decodeObject(body, "target", bodyOwned, decodeNodeTarget)
}

// decodeOne reads a body that is one object, what, with dec: all of it, or
// an error naming every problem.
func decodeOne[T any](body []byte, what string, dec func(*decoder, *T)) (T, error) {
	return decodeObject(body, what, 0, dec)
}

// decodeFlags adjust decodeObject.
type decodeFlags uint8

const (
	// skipUnknown skips unknown members, as replies are read.
	skipUnknown decodeFlags = 1 << iota
	// bodyOwned: the caller gives the body up, so the strings decoded
	// share its memory rather than a copy's.
	bodyOwned
)

// decodeObject is decodeOne, as flags say.
func decodeObject[T any](body []byte, what string, flags decodeFlags, dec func(*decoder, *T)) (T, error) {
	d := decoders.Get().(*decoder)
	defer d.release()
	if flags&bodyOwned != 0 {
		d.resetShared(body)
	} else {
		d.reset(body)
	}
	d.lenient = flags&skipUnknown != 0
	var v T
	if d.peek() == 0 {
		d.add("empty body: want a " + what + " object")
	} else {
		dec(d, &v)
		if !d.broken && d.peek() != 0 {
			d.syntax("trailing data after the %s", what)
		}
	}
	if err := d.err(); err != nil {
		var zero T
		return zero, err
	}
	return v, nil
}

func decodeNodeTarget(d *decoder, t *NodeTarget) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "generation":
			if d.field(&seen, 0) {
				t.Generation = uint64(d.intIn(0, math.MaxInt64))
			}
		case "base":
			if d.field(&seen, 1) {
				t.Base = uint64(d.intIn(0, math.MaxInt64))
			}
		case "pods":
			if d.field(&seen, 2) && d.openArray() {
				for d.nextElem() {
					start := d.pos
					t.Pods = append(t.Pods, TargetPod{})
					decodeTargetPod(d, &t.Pods[len(t.Pods)-1])
					if len(t.Pods) == 1 {
						t.Pods = slices.Grow(t.Pods, d.moreItems(start))
					}
				}
			}
		case "removed":
			if d.field(&seen, 3) {
				t.Removed = d.strs()
			}
		default:
			d.unknown()
		}
	}
}

// podMemo is the last pod spec a target's decoder read, and its text.
type podMemo struct {
	text string
	spec PodSpec
}

// targetPod reads a target pod's spec. The pods of a task group, and often
// those of many jobs, have the same spec: one whose text is the same as
// the last one read, which decoded without a problem, is not read again
// but shares that one's memory.
func (d *decoder) targetPod(p *PodSpec) {
	if d.peek() == '{' && d.lastPod.text != "" && strings.HasPrefix(d.text[d.pos:], d.lastPod.text) {
		// A JSON object ends where its text says: the same text is the
		// same whole object.
		d.pos += len(d.lastPod.text)
		*p = d.lastPod.spec
		return
	}
	start, problems := d.pos, d.total
	decodePodSpec(d, p)
	if !d.broken && d.total == problems {
		d.lastPod = podMemo{text: d.text[start:d.pos], spec: *p}
	}
}

func decodeTargetPod(d *decoder, p *TargetPod) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "task_id":
			if d.field(&seen, 0) {
				p.TaskID = d.str()
			}
		case "job":
			if d.field(&seen, 1) {
				p.Job = d.str()
			}
		case "job_name":
			if d.field(&seen, 9) {
				p.JobName = d.str()
			}
		case "count":
			if d.field(&seen, 10) {
				p.Count = d.intIn(0, MaxTaskCount)
			}
		case "group":
			if d.field(&seen, 2) {
				p.Group = d.str()
			}
		case "qos":
			if d.field(&seen, 3) {
				p.QoS = QoS(d.str())
			}
		case "priority":
			if d.field(&seen, 4) {
				p.Priority = d.int32()
			}
		case "pod":
			if d.field(&seen, 5) {
				d.targetPod(&p.Pod)
			}
		case "max_run_time":
			if d.field(&seen, 6) {
				p.MaxRunTime = d.duration()
			}
		case "capbox":
			if d.field(&seen, 7) {
				p.Capbox = d.boolean()
			}
		case "in_capbox":
			if d.field(&seen, 8) {
				p.InCapbox = d.str()
			}
		case "token":
			if d.field(&seen, 11) {
				p.Token = d.str()
			}
		case "ports":
			if d.field(&seen, 12) {
				p.Ports = objects(d, p.Ports, decodePort)
			}
		default:
			d.unknown()
		}
	}
}

// DecodeReportRequest reads a node's report request (POST
// /v1/nodes/{name}/reports) with the same strictness as DecodeJobs, without
// validating it (ReportRequest.Validate does): the dispatcher reads one per
// heartbeat of every node.
func DecodeReportRequest(body []byte) (ReportRequest, error) {
	return decodeOne(body, "report request", decodeReportRequest)
}

func decodeReportRequest(d *decoder, r *ReportRequest) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "reports":
			if d.field(&seen, 0) {
				r.Reports = objects(d, r.Reports, decodeTaskReport)
			}
		case "usage":
			if !d.field(&seen, 1) {
				continue
			}
			if d.peek() == 'n' {
				d.skipValue() // null: no usage
			} else {
				r.Usage = &NodeUsage{}
				decodeNodeUsage(d, r.Usage)
			}
		default:
			d.unknown()
		}
	}
}

func decodeTaskReport(d *decoder, r *TaskReport) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "task_id":
			if d.field(&seen, 0) {
				r.TaskID = d.str()
			}
		case "state":
			if d.field(&seen, 1) {
				r.State = d.taskState()
			}
		case "reason":
			if d.field(&seen, 2) {
				r.Reason = TaskReason(d.str())
			}
		case "exit_code":
			if d.field(&seen, 3) {
				r.ExitCode = d.int32()
			}
		case "message":
			if d.field(&seen, 4) {
				r.Message = d.str()
			}
		case "time":
			if d.field(&seen, 5) {
				r.Time = d.time()
			}
		case "usage":
			if d.field(&seen, 6) {
				decodeUsage(d, &r.Usage)
			}
		default:
			d.unknown()
		}
	}
}

func decodeNodeUsage(d *decoder, u *NodeUsage) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "total":
			if d.field(&seen, 0) {
				decodeUsage(d, &u.Total)
			}
		case "online":
			if d.field(&seen, 1) {
				decodeUsage(d, &u.Online)
			}
		case "offline":
			if d.field(&seen, 2) {
				decodeUsage(d, &u.Offline)
			}
		case "tasks":
			if d.field(&seen, 3) && d.openArray() {
				for d.nextElem() {
					u.Tasks = append(u.Tasks, TaskUsage{})
					decodeTaskUsage(d, &u.Tasks[len(u.Tasks)-1])
				}
			}
		case "overcommit":
			if !d.field(&seen, 4) {
				continue
			}
			if d.peek() == 'n' {
				d.skipValue() // null: no status
			} else {
				u.Overcommit = &OvercommitStatus{}
				decodeOvercommitStatus(d, u.Overcommit)
			}
		default:
			d.unknown()
		}
	}
}

func decodeOvercommitStatus(d *decoder, o *OvercommitStatus) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "cpu_quota":
			if d.field(&seen, 0) {
				o.CPUQuota = d.int64()
			}
		case "cpu_min":
			if d.field(&seen, 1) {
				o.CPUMin = d.int64()
			}
		case "cpu_max":
			if d.field(&seen, 2) {
				o.CPUMax = d.int64()
			}
		case "memory_limit":
			if d.field(&seen, 3) {
				o.MemoryLimit = d.int64()
			}
		case "memory_guaranteed":
			if d.field(&seen, 4) {
				o.MemoryGuaranteed = d.int64()
			}
		case "decided":
			if d.field(&seen, 5) {
				o.Decided = d.time()
			}
		default:
			d.unknown()
		}
	}
}

func decodeUsage(d *decoder, u *Usage) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "cpu":
			if d.field(&seen, 0) {
				u.CPU = d.int64()
			}
		case "memory":
			if d.field(&seen, 1) {
				u.Memory = d.int64()
			}
		default:
			d.unknown()
		}
	}
}

// decodeTaskUsage reads a TaskUsage, whose embedded Usage's fields are
// members of the same object.
func decodeTaskUsage(d *decoder, u *TaskUsage) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "task_id":
			if d.field(&seen, 0) {
				u.TaskID = d.str()
			}
		case "qos":
			if d.field(&seen, 1) {
				u.QoS = QoS(d.str())
			}
		case "cpu":
			if d.field(&seen, 2) {
				u.CPU = d.int64()
			}
		case "memory":
			if d.field(&seen, 3) {
				u.Memory = d.int64()
			}
		default:
			d.unknown()
		}
	}
}

// DecodeWatchEvent reads one event of the watch stream (a line of GET
// /v1/watch). Unlike the request decoders it skips members it does not
// know, as a client must with a newer server; wrong types and broken
// syntax are errors naming the path.
func DecodeWatchEvent(line []byte) (WatchEvent, error) {
	return decodeObject(line, "watch event", skipUnknown, decodeWatchEvent)
}

func decodeWatchEvent(d *decoder, e *WatchEvent) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "index":
			if d.field(&seen, 0) {
				e.Index = uint64(d.intIn(0, math.MaxInt64))
			}
		case "job":
			if d.field(&seen, 1) {
				decodeJobStatus(d, &e.Job)
			}
		default:
			d.unknown()
		}
	}
}

func decodeJobStatus(d *decoder, j *JobStatus) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "id":
			if d.field(&seen, 0) {
				j.ID = d.str()
			}
		case "state":
			if d.field(&seen, 1) {
				j.State = JobState(d.str())
			}
		case "submitted":
			if d.field(&seen, 2) {
				j.Submitted = d.time()
			}
		case "spec":
			if d.field(&seen, 3) {
				decodeJobSpec(d, &j.Spec)
			}
		case "appmaster":
			if d.field(&seen, 4) {
				j.Appmaster = d.str()
			}
		case "tasks":
			if d.field(&seen, 5) {
				decodeTaskCounts(d, &j.Tasks, nil)
			}
		case "groups":
			if d.field(&seen, 6) {
				j.Groups = objects(d, j.Groups, func(d *decoder, g *GroupStatus) { decodeTaskCounts(d, &g.TaskCounts, &g.Name) })
			}
		case "pending_diagnosis":
			if d.field(&seen, 7) {
				j.Pending = objects(d, j.Pending, decodePendingReason)
			}
		case "history":
			if d.field(&seen, 8) {
				j.History = d.boolean()
			}
		case "started":
			if d.field(&seen, 9) {
				j.Started = d.time()
			}
		case "ended":
			if d.field(&seen, 10) {
				j.Ended = d.time()
			}
		case "first_failure":
			if d.field(&seen, 11) {
				if d.peek() == 'n' {
					d.skipValue()
					j.FirstFailure = nil
					continue
				}
				j.FirstFailure = new(TaskFailure)
				decodeTaskFailure(d, j.FirstFailure)
			}
		default:
			d.unknown()
		}
	}
}

func decodeTaskFailure(d *decoder, f *TaskFailure) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "task":
			if d.field(&seen, 0) {
				f.Task = d.str()
			}
		case "state":
			if d.field(&seen, 1) {
				f.State = d.taskState()
			}
		case "reason":
			if d.field(&seen, 2) {
				f.Reason = TaskReason(d.str())
			}
		case "exit_code":
			if d.field(&seen, 3) {
				f.ExitCode = d.int32()
			}
		case "at":
			if d.field(&seen, 4) {
				f.At = d.time()
			}
		default:
			d.unknown()
		}
	}
}

// decodeTaskCounts reads task counts, and a group's name into name when
// it is not nil (a GroupStatus is its name and its counts in one object).
func decodeTaskCounts(d *decoder, c *TaskCounts, name *string) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		var dst *int64
		var bit uint
		switch string(d.key()) {
		case "total":
			dst, bit = &c.Total, 0
		case "pending":
			dst, bit = &c.Pending, 1
		case "retrying":
			dst, bit = &c.Retrying, 2
		case "active":
			dst, bit = &c.Active, 3
		case "succeeded":
			dst, bit = &c.Succeeded, 4
		case "failed":
			dst, bit = &c.Failed, 5
		case "killed":
			dst, bit = &c.Killed, 6
		case "name":
			if name == nil {
				d.unknown()
			} else if d.field(&seen, 7) {
				*name = d.str()
			}
			continue
		default:
			d.unknown()
			continue
		}
		if d.field(&seen, bit) {
			*dst = d.int64()
		}
	}
}

func decodePendingReason(d *decoder, p *PendingReason) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "group":
			if d.field(&seen, 0) {
				p.Group = d.str()
			}
		case "tasks":
			if d.field(&seen, 1) {
				p.Tasks = d.int64()
			}
		case "reason":
			if d.field(&seen, 2) {
				p.Reason = d.str()
			}
		default:
			d.unknown()
		}
	}
}

// DecodeSubmitResponse reads the reply of POST /v1/jobs. Like
// DecodeWatchEvent it skips members it does not know; a missing or wrong
// type and broken syntax are errors naming the path. A client reads one
// per submission, with up to MaxItemsPerRequest job IDs in it.
func DecodeSubmitResponse(body []byte) (SubmitResponse, error) {
	return decodeObject(body, "submit reply", skipUnknown, decodeSubmitResponse)
}

func decodeSubmitResponse(d *decoder, r *SubmitResponse) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "jobs":
			if d.field(&seen, 0) {
				array := d.peek() == '['
				if r.Jobs = d.strs(); array && r.Jobs == nil {
					r.Jobs = []string{} // as encoding/json reads "[]"
				}
			}
		case "existing":
			if d.field(&seen, 1) && d.openArray() {
				r.Existing = []int{}
				for d.nextElem() {
					r.Existing = append(r.Existing, int(d.intIn(0, MaxItemsPerRequest-1)))
				}
			}
		default:
			d.unknown()
		}
	}
}

// DecodeTaskList reads a page of a job's tasks (the reply of GET
// /v1/jobs/{id}/tasks). Like DecodeWatchEvent it skips members it does
// not know; wrong types and broken syntax are errors naming the path.
func DecodeTaskList(body []byte) (TaskList, error) {
	return decodeObject(body, "task list", skipUnknown, decodeTaskList)
}

func decodeTaskList(d *decoder, l *TaskList) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "tasks":
			if d.field(&seen, 0) {
				l.Tasks = objects(d, l.Tasks, decodeTaskStatus)
			}
		case "next":
			if d.field(&seen, 1) {
				l.Next = d.str()
			}
		default:
			d.unknown()
		}
	}
}

func decodeTaskStatus(d *decoder, t *TaskStatus) {
	if !d.openObject() {
		return
	}
	var seen uint64
	for d.nextMember() {
		switch string(d.key()) {
		case "id":
			if d.field(&seen, 0) {
				t.ID = d.str()
			}
		case "group":
			if d.field(&seen, 1) {
				t.Group = d.str()
			}
		case "index":
			if d.field(&seen, 2) {
				t.Index = d.int64()
			}
		case "attempt":
			if d.field(&seen, 3) {
				t.Attempt = d.int64()
			}
		case "state":
			if d.field(&seen, 4) {
				t.State = d.taskState()
			}
		case "node":
			if d.field(&seen, 5) {
				t.Node = d.str()
			}
		case "host":
			if d.field(&seen, 9) {
				t.Host = d.str()
			}
		case "ports":
			if d.field(&seen, 10) {
				t.Ports = objects(d, t.Ports, decodePort)
			}
		case "reason":
			if d.field(&seen, 6) {
				t.Reason = TaskReason(d.str())
			}
		case "exit_code":
			if d.field(&seen, 7) {
				t.ExitCode = d.int32()
			}
		case "updated":
			if d.field(&seen, 8) {
				t.Updated = d.time()
			}
		default:
			d.unknown()
		}
	}
}

// objects reads an array of values with dec into a fresh, non-nil slice
// (an empty array gives an empty one, as in encoding/json); null or a
// value of another type leaves was. The slice is sized after the first
// value by itemsGuess, as bulk arrays are mostly alike.
func objects[T any](d *decoder, was []T, dec func(*decoder, *T)) []T {
	if !d.openArray() {
		return was
	}
	out := []T{}
	for d.nextElem() {
		start := d.pos
		out = append(out, *new(T))
		dec(d, &out[len(out)-1])
		if len(out) == 1 {
			out = slices.Grow(out, d.moreItems(start))
		}
	}
	return out
}

// taskState reads a task state's name; null leaves it zero, as in
// encoding/json.
func (d *decoder) taskState() TaskState {
	if d.peek() == 'n' {
		d.skipValue()
		return 0
	}
	st, err := ParseTaskState(d.str())
	if err != nil && !d.broken {
		d.add(err.Error())
	}
	return st
}
