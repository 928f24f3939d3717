package api

import (
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// The busiest bodies are encoded without reflection, byte for byte as
// encoding/json writes them (a test compares the two on random values): the
// dispatcher writes a target for every change of a node's pods and a submit
// reply for every submission, and every nodelet writes a report request for
// every batch of state changes. Job specs and pods are written by the
// generated appendJobSpec and appendPodSpec (spec_json_gen.go), the rest
// here.

// AppendNodeTarget appends the JSON of t to dst.
func AppendNodeTarget(dst []byte, t *NodeTarget) []byte {
	return appendNodeTarget(dst, t, true)
}

// AppendNodeTargetBare is AppendNodeTarget without the pods' JobName,
// Count, Token and Ports, for a node that did not ask for them (identity=1): the nodelets
// of the release before refuse a target with members they do not know.
func AppendNodeTargetBare(dst []byte, t *NodeTarget) []byte {
	return appendNodeTarget(dst, t, false)
}

func appendNodeTarget(dst []byte, t *NodeTarget, identity bool) []byte {
	dst = append(dst, `{"generation":`...)
	dst = strconv.AppendUint(dst, t.Generation, 10)
	if t.Base != 0 {
		dst = append(dst, `,"base":`...)
		dst = strconv.AppendUint(dst, t.Base, 10)
	}
	dst = append(dst, `,"pods":`...)
	if t.Pods == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		var last specText
		for i := range t.Pods {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendTargetPod(dst, &t.Pods[i], &last, identity)
		}
		dst = append(dst, ']')
	}
	if len(t.Removed) > 0 {
		dst = append(dst, `,"removed":`...)
		dst = appendStrings(dst, t.Removed)
	}
	return append(dst, '}')
}

// specText is where in the output the last target pod's spec was written,
// and its JobName and Count (idStart == idEnd: none written).
type specText struct {
	spec           *PodSpec
	start, end     int
	jobName        string
	count          int64
	idStart, idEnd int
}

// samePodSpec reports whether a and b share their memory, as the pods of
// one task group do in the dispatcher: then they are written alike.
func samePodSpec(a, b *PodSpec) bool {
	return len(a.Containers) == len(b.Containers) && (len(a.Containers) == 0 || &a.Containers[0] == &b.Containers[0]) &&
		a.SharePID == b.SharePID && a.Sim == b.Sim && a.Network == b.Network &&
		len(a.Volumes) == len(b.Volumes) && (len(a.Volumes) == 0 || &a.Volumes[0] == &b.Volumes[0])
}

// appendTargetPod writes p, with its JobName, Count and Token when
// identity is set; its spec is copied from the text of the last pod's when the two
// share their memory.
func appendTargetPod(dst []byte, p *TargetPod, last *specText, identity bool) []byte {
	dst = append(dst, `{"task_id":`...)
	dst = appendJSONString(dst, p.TaskID)
	dst = append(dst, `,"job":`...)
	dst = appendJSONString(dst, p.Job)
	if identity {
		// The pods of a group, written one after the other, have the
		// same JobName and Count: their text is copied.
		if last.idStart != last.idEnd && p.Count == last.count && p.JobName == last.jobName {
			dst = append(dst, dst[last.idStart:last.idEnd]...)
		} else {
			start := len(dst)
			if p.JobName != "" {
				dst = append(dst, `,"job_name":`...)
				dst = appendJSONString(dst, p.JobName)
			}
			if p.Count != 0 {
				dst = append(dst, `,"count":`...)
				dst = strconv.AppendInt(dst, p.Count, 10)
			}
			last.jobName, last.count, last.idStart, last.idEnd = p.JobName, p.Count, start, len(dst)
		}
	}
	dst = append(dst, `,"group":`...)
	dst = appendJSONString(dst, p.Group)
	dst = append(dst, `,"qos":`...)
	dst = appendJSONString(dst, string(p.QoS))
	dst = append(dst, `,"priority":`...)
	dst = strconv.AppendInt(dst, int64(p.Priority), 10)
	dst = append(dst, `,"pod":`...)
	if last.spec != nil && samePodSpec(last.spec, &p.Pod) {
		dst = append(dst, dst[last.start:last.end]...)
	} else {
		start := len(dst)
		dst = appendPodSpec(dst, &p.Pod)
		last.spec, last.start, last.end = &p.Pod, start, len(dst)
	}
	if p.MaxRunTime != 0 {
		dst = append(dst, `,"max_run_time":`...)
		dst = appendDuration(dst, p.MaxRunTime)
	}
	if p.Capbox {
		dst = append(dst, `,"capbox":true`...)
	}
	if p.InCapbox != "" {
		dst = append(dst, `,"in_capbox":`...)
		dst = appendJSONString(dst, p.InCapbox)
	}
	if identity && p.Token != "" {
		dst = append(dst, `,"token":`...)
		dst = appendJSONString(dst, p.Token)
	}
	if identity && len(p.Ports) > 0 {
		dst = append(dst, `,"ports":`...)
		dst = appendArray(dst, p.Ports, appendPort)
	}
	return append(dst, '}')
}

// AppendReportRequest appends the JSON of r to dst. It fails, as
// encoding/json does, on a task state that has no name and on a time
// RFC 3339 cannot write.
func AppendReportRequest(dst []byte, r *ReportRequest) ([]byte, error) {
	dst = append(dst, `{"reports":`...)
	dst, i, err := appendArrayOrFail(dst, r.Reports, appendTaskReport)
	if err != nil {
		return nil, fmt.Errorf("reports[%d]: %w", i, err)
	}
	if u := r.Usage; u != nil {
		dst = append(dst, `,"usage":{"total":`...)
		dst = appendUsage(dst, u.Total)
		dst = append(dst, `,"online":`...)
		dst = appendUsage(dst, u.Online)
		dst = append(dst, `,"offline":`...)
		dst = appendUsage(dst, u.Offline)
		if len(u.Tasks) > 0 {
			dst = append(dst, `,"tasks":`...)
			dst = appendArray(dst, u.Tasks, appendTaskUsage)
		}
		if o := u.Overcommit; o != nil {
			dst = append(dst, `,"overcommit":`...)
			if dst, err = appendOvercommitStatus(dst, o); err != nil {
				return nil, fmt.Errorf("usage.overcommit.decided: %w", err)
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// appendOvercommitStatus fails only on a Decided time RFC 3339 cannot
// write.
func appendOvercommitStatus(dst []byte, o *OvercommitStatus) ([]byte, error) {
	dst = append(dst, `{"cpu_quota":`...)
	dst = strconv.AppendInt(dst, o.CPUQuota, 10)
	dst = append(dst, `,"cpu_min":`...)
	dst = strconv.AppendInt(dst, o.CPUMin, 10)
	dst = append(dst, `,"cpu_max":`...)
	dst = strconv.AppendInt(dst, o.CPUMax, 10)
	dst = append(dst, `,"memory_limit":`...)
	dst = strconv.AppendInt(dst, o.MemoryLimit, 10)
	dst = append(dst, `,"memory_guaranteed":`...)
	dst = strconv.AppendInt(dst, o.MemoryGuaranteed, 10)
	dst, err := appendTimeMember(dst, "decided", o.Decided)
	if err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

func appendTaskReport(dst []byte, r *TaskReport) ([]byte, error) {
	dst = append(dst, `{"task_id":`...)
	dst = appendJSONString(dst, r.TaskID)
	dst = append(dst, `,"state":`...)
	dst, err := appendTaskState(dst, r.State)
	if err != nil {
		return nil, err
	}
	dst = append(dst, `,"reason":`...)
	dst = appendJSONString(dst, string(r.Reason))
	if r.ExitCode != 0 {
		dst = append(dst, `,"exit_code":`...)
		dst = strconv.AppendInt(dst, int64(r.ExitCode), 10)
	}
	if r.Message != "" {
		dst = append(dst, `,"message":`...)
		dst = appendJSONString(dst, r.Message)
	}
	dst = append(dst, `,"time":"`...)
	if dst, err = r.Time.AppendText(dst); err != nil {
		return nil, fmt.Errorf("time: %w", err)
	}
	dst = append(dst, '"')
	if r.Usage != (Usage{}) {
		dst = append(dst, `,"usage":`...)
		dst = appendUsage(dst, r.Usage)
	}
	return append(dst, '}'), nil
}

func appendTaskUsage(dst []byte, t *TaskUsage) []byte {
	dst = append(dst, `{"task_id":`...)
	dst = appendJSONString(dst, t.TaskID)
	dst = append(dst, `,"qos":`...)
	dst = appendJSONString(dst, string(t.QoS))
	dst = appendUsageFields(append(dst, ','), t.Usage)
	return append(dst, '}')
}

func appendUsage(dst []byte, u Usage) []byte {
	return append(appendUsageFields(append(dst, '{'), u), '}')
}

func appendUsageFields(dst []byte, u Usage) []byte {
	dst = append(dst, `"cpu":`...)
	dst = strconv.AppendInt(dst, u.CPU, 10)
	dst = append(dst, `,"memory":`...)
	return strconv.AppendInt(dst, u.Memory, 10)
}

// AppendSubmitResponse appends the JSON of r to dst: the reply to every
// submission, with up to MaxItemsPerRequest job IDs.
func AppendSubmitResponse(dst []byte, r *SubmitResponse) []byte {
	dst = append(dst, `{"jobs":`...)
	dst = appendStrings(dst, r.Jobs)
	if len(r.Existing) > 0 {
		dst = append(dst, `,"existing":`...)
		dst = appendArray(dst, r.Existing, func(dst []byte, v *int) []byte { return strconv.AppendInt(dst, int64(*v), 10) })
	}
	return append(dst, '}')
}

func appendDuration(dst []byte, d Duration) []byte {
	return strconv.AppendQuote(dst, time.Duration(d).String())
}

func appendStrings(dst []byte, vs []string) []byte {
	return appendArray(dst, vs, func(dst []byte, v *string) []byte { return appendJSONString(dst, *v) })
}

// appendArray appends items as a JSON array, each with f; a nil slice as
// null.
func appendArray[T any](dst []byte, items []T, f func([]byte, *T) []byte) []byte {
	if items == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for i := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = f(dst, &items[i])
	}
	return append(dst, ']')
}

// appendArrayOrFail is appendArray for an f that can fail: it stops at
// the first item f fails on and returns its index with the error.
func appendArrayOrFail[T any](dst []byte, items []T, f func([]byte, *T) ([]byte, error)) ([]byte, int, error) {
	if items == nil {
		return append(dst, "null"...), 0, nil
	}
	dst = append(dst, '[')
	for i := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = f(dst, &items[i]); err != nil {
			return nil, i, err
		}
	}
	return append(dst, ']'), 0, nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it: quote and backslash; control characters (\b \f \n \r \t
// short, others \u00XX); <, > and & (\u003c, \u003e, \u0026); U+2028 and
// U+2029; and each invalid UTF-8 byte as \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendWatchEvent appends the JSON of e (a line of the watch stream,
// without its newline) to dst. It fails, as encoding/json does, on a time
// RFC 3339 cannot write.
func AppendWatchEvent(dst []byte, e *WatchEvent) ([]byte, error) {
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendUint(dst, e.Index, 10)
	dst = append(dst, `,"job":`...)
	dst, err := appendJobStatus(dst, &e.Job)
	if err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

func appendJobStatus(dst []byte, j *JobStatus) ([]byte, error) {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, j.ID)
	dst = append(dst, `,"state":`...)
	dst = appendJSONString(dst, string(j.State))
	dst = append(dst, `,"submitted":"`...)
	dst, err := j.Submitted.AppendText(dst)
	if err != nil {
		return nil, fmt.Errorf("job %s: submitted: %w", j.ID, err)
	}
	dst = append(dst, `","spec":`...)
	dst = appendJobSpec(dst, &j.Spec)
	if j.Appmaster != "" {
		dst = append(dst, `,"appmaster":`...)
		dst = appendJSONString(dst, j.Appmaster)
	}
	dst = append(dst, `,"tasks":`...)
	dst = append(appendTaskCounts(append(dst, '{'), &j.Tasks), '}')
	dst = append(dst, `,"groups":`...)
	dst = appendArray(dst, j.Groups, func(dst []byte, g *GroupStatus) []byte {
		dst = append(dst, `{"name":`...)
		dst = appendJSONString(dst, g.Name)
		return append(appendTaskCounts(append(dst, ','), &g.TaskCounts), '}')
	})
	if len(j.Pending) > 0 {
		dst = append(dst, `,"pending_diagnosis":`...)
		dst = appendArray(dst, j.Pending, func(dst []byte, p *PendingReason) []byte {
			dst = append(dst, `{"group":`...)
			dst = appendJSONString(dst, p.Group)
			dst = append(dst, `,"tasks":`...)
			dst = strconv.AppendInt(dst, p.Tasks, 10)
			dst = append(dst, `,"reason":`...)
			dst = appendJSONString(dst, p.Reason)
			return append(dst, '}')
		})
	}
	if j.History {
		dst = append(dst, `,"history":true`...)
	}
	for _, t := range []struct {
		name string
		t    time.Time
	}{{"started", j.Started}, {"ended", j.Ended}} {
		if t.t.IsZero() {
			continue
		}
		if dst, err = appendTimeMember(dst, t.name, t.t); err != nil {
			return nil, fmt.Errorf("job %s: %s: %w", j.ID, t.name, err)
		}
	}
	if f := j.FirstFailure; f != nil {
		dst = append(dst, `,"first_failure":{"task":`...)
		dst = appendJSONString(dst, f.Task)
		dst = append(dst, `,"state":`...)
		dst = appendJSONString(dst, f.State.String())
		if f.Reason != "" {
			dst = append(dst, `,"reason":`...)
			dst = appendJSONString(dst, string(f.Reason))
		}
		if f.ExitCode != 0 {
			dst = append(dst, `,"exit_code":`...)
			dst = strconv.AppendInt(dst, int64(f.ExitCode), 10)
		}
		if dst, err = appendTimeMember(dst, "at", f.At); err != nil {
			return nil, fmt.Errorf("job %s: first failure: %w", j.ID, err)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}'), nil
}

// appendTimeMember appends `,"name":"t"`, t in RFC 3339 as encoding/json
// writes it.
func appendTimeMember(dst []byte, name string, t time.Time) ([]byte, error) {
	dst = append(append(append(dst, `,"`...), name...), `":"`...)
	dst, err := t.AppendText(dst)
	if err != nil {
		return nil, err
	}
	return append(dst, '"'), nil
}

// appendTaskCounts appends c's members, without braces.
func appendTaskCounts(dst []byte, c *TaskCounts) []byte {
	dst = append(dst, `"total":`...)
	dst = strconv.AppendInt(dst, c.Total, 10)
	dst = append(dst, `,"pending":`...)
	dst = strconv.AppendInt(dst, c.Pending, 10)
	if c.Retrying != 0 {
		dst = append(dst, `,"retrying":`...)
		dst = strconv.AppendInt(dst, c.Retrying, 10)
	}
	dst = append(dst, `,"active":`...)
	dst = strconv.AppendInt(dst, c.Active, 10)
	dst = append(dst, `,"succeeded":`...)
	dst = strconv.AppendInt(dst, c.Succeeded, 10)
	dst = append(dst, `,"failed":`...)
	dst = strconv.AppendInt(dst, c.Failed, 10)
	dst = append(dst, `,"killed":`...)
	return strconv.AppendInt(dst, c.Killed, 10)
}

// appendStringMap appends m as a JSON object, keys in order.
func appendStringMap(dst []byte, m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, m[k])
	}
	return append(dst, '}')
}

// AppendTaskList appends the JSON of l (a page of GET
// /v1/jobs/{id}/tasks) to dst, as encoding/json writes it. It fails, as
// encoding/json does, on a task state without a name or a time RFC 3339
// cannot write, naming the task.
func AppendTaskList(dst []byte, l *TaskList) ([]byte, error) {
	dst = append(dst, `{"tasks":`...)
	dst, i, err := appendArrayOrFail(dst, l.Tasks, appendTaskStatus)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", l.Tasks[i].ID, err)
	}
	if l.Next != "" {
		dst = append(dst, `,"next":`...)
		dst = appendJSONString(dst, l.Next)
	}
	return append(dst, '}'), nil
}

// appendTaskState appends s's name as a JSON string; it fails, as
// MarshalText does, on a state without a name.
func appendTaskState(dst []byte, s TaskState) ([]byte, error) {
	if !taskMachine.valid(s) {
		_, err := s.MarshalText()
		return nil, err
	}
	return appendJSONString(dst, taskMachine.names[s]), nil
}

func appendTaskStatus(dst []byte, t *TaskStatus) ([]byte, error) {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, t.ID)
	dst = append(dst, `,"group":`...)
	dst = appendJSONString(dst, t.Group)
	dst = append(dst, `,"index":`...)
	dst = strconv.AppendInt(dst, t.Index, 10)
	dst = append(dst, `,"attempt":`...)
	dst = strconv.AppendInt(dst, t.Attempt, 10)
	dst = append(dst, `,"state":`...)
	dst, err := appendTaskState(dst, t.State)
	if err != nil {
		return nil, err
	}
	dst = append(dst, `,"node":`...)
	dst = appendJSONString(dst, t.Node)
	if t.Host != "" {
		dst = append(dst, `,"host":`...)
		dst = appendJSONString(dst, t.Host)
	}
	if len(t.Ports) > 0 {
		dst = append(dst, `,"ports":`...)
		dst = appendArray(dst, t.Ports, appendPort)
	}
	if t.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = appendJSONString(dst, string(t.Reason))
	}
	if t.ExitCode != 0 {
		dst = append(dst, `,"exit_code":`...)
		dst = strconv.AppendInt(dst, int64(t.ExitCode), 10)
	}
	dst = append(dst, `,"updated":"`...)
	if dst, err = t.Updated.AppendText(dst); err != nil {
		return nil, fmt.Errorf("updated: %w", err)
	}
	return append(dst, `"}`...), nil
}
