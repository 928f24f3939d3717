package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

// typicalJob returns a typical single-task job spec of about 250 bytes.
func typicalJob(i int) string {
	return fmt.Sprintf(`{"name":"etl-%06d","queue":"batch","priority":10,"qos":"offline","tasks":[{"count":1,"pod":{"containers":[{"image":{"rootfs":"/srv/images/alpine"},"command":["/bin/sh","-c","process shard %d"],"resources":{"cpu":500,"memory":"256Mi"}}]}}]}`, i, i)
}

// ndjson returns n typical jobs as NDJSON.
func ndjson(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		b.WriteString(typicalJob(i))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// BenchmarkDecodeJobs measures decode+validate of typical single-task job
// specs in bulk bodies, reporting job specs per second on one core.
func BenchmarkDecodeJobs(b *testing.B) {
	for _, n := range []int{1, 1000} {
		body := ndjson(n)
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				jobs, err := api.DecodeJobs(body)
				if err != nil || len(jobs) != n {
					b.Fatalf("decode: %d jobs, %v", len(jobs), err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "jobs/s")
			b.ReportMetric(float64(len(body))/float64(n), "bytes/job")
		})
	}
}

// BenchmarkDecodeUnvalidated measures what the dispatcher's submit handler
// reads a bulk body with: defaults, no validation, into a JobArena reused
// from one body to the next (its allocations per body are what reuse
// leaves).
func BenchmarkDecodeUnvalidated(b *testing.B) {
	body := ndjson(1000)
	var a api.JobArena
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if jobs, err := a.DecodeUnvalidated(body); err != nil || len(jobs) != 1000 {
			b.Fatalf("decode: %d jobs, %v", len(jobs), err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkDecodeJobsStdlib is the anchor for BenchmarkDecodeJobs: the same
// NDJSON bodies read by encoding/json into the same types, with no
// validation, defaults, duplicate-key or trailing-data checks.
func BenchmarkDecodeJobsStdlib(b *testing.B) {
	for _, n := range []int{1, 1000} {
		body := bytes.ReplaceAll(ndjson(n), []byte(`"256Mi"`), []byte(`268435456`))
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				dec := json.NewDecoder(bytes.NewReader(body))
				dec.DisallowUnknownFields()
				var jobs []api.JobSpec
				for {
					var j api.JobSpec
					if err := dec.Decode(&j); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					jobs = append(jobs, j)
				}
				if len(jobs) != n {
					b.Fatalf("decoded %d jobs", len(jobs))
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}

// nodeTarget returns a node's target of n typical single-container pods,
// in task groups of group pods that share one spec (1: no two alike).
func nodeTarget(n, group int) api.NodeTarget {
	t := api.NodeTarget{Generation: 1234, Base: 1200}
	var spec api.PodSpec
	for i := range n {
		if i%group == 0 {
			spec = api.PodSpec{Containers: []api.ContainerSpec{{Name: "main", Image: api.Image{Rootfs: "/srv/images/alpine"},
				Command: []string{"/bin/sh", "-c", fmt.Sprintf("process shard %d", i)}, Resources: api.Resources{CPU: 500, Memory: 256 << 20}}},
				Sim: &api.SimSpec{RunTime: api.Duration(time.Second)}}
		}
		j := 100 + i/group
		t.Pods = append(t.Pods, api.TargetPod{
			TaskID: fmt.Sprintf("j%d/0/%d/1", j, i%group), Job: fmt.Sprintf("j%d", j), JobName: "etl.nightly", Count: int64(group),
			Group: "g", QoS: api.QoSOffline, Priority: 10, Pod: spec,
		})
	}
	return t
}

// targetShapes are the targets the target benchmarks read and write: 40
// pods with specs all different, and 40 pods of arrays of 8.
var targetShapes = []struct {
	name  string
	group int
}{{"distinct", 1}, {"groups8", 8}}

// benchTargets runs f, one pass over a target of 40 pods (and its JSON),
// as a sub-benchmark for each of targetShapes, and reports the time per
// pod.
func benchTargets(b *testing.B, f func(b *testing.B, t *api.NodeTarget, body []byte)) {
	for _, sh := range targetShapes {
		b.Run(sh.name, func(b *testing.B) {
			t := nodeTarget(40, sh.group)
			body, err := json.Marshal(t)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				f(b, &t, body)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(40*b.N), "ns/pod")
		})
	}
}

// BenchmarkDecodeNodeTarget measures the nodelet's read of a target, beside
// encoding/json's (BenchmarkDecodeNodeTargetStdlib), per pod.
func BenchmarkDecodeNodeTarget(b *testing.B) {
	benchTargets(b, func(b *testing.B, _ *api.NodeTarget, body []byte) {
		if t, err := api.DecodeNodeTarget(body); err != nil || len(t.Pods) != 40 {
			b.Fatalf("decode: %d pods, %v", len(t.Pods), err)
		}
	})
}

func BenchmarkDecodeNodeTargetStdlib(b *testing.B) {
	benchTargets(b, func(b *testing.B, _ *api.NodeTarget, body []byte) {
		var t api.NodeTarget
		if err := json.Unmarshal(body, &t); err != nil || len(t.Pods) != 40 {
			b.Fatalf("decode: %d pods, %v", len(t.Pods), err)
		}
	})
}

// BenchmarkEncodeNodeTarget measures the dispatcher's write of a target of
// 40 pods, beside encoding/json's (BenchmarkEncodeNodeTargetStdlib), per
// pod. The pods of a group share their spec's memory, as in the
// dispatcher.
func BenchmarkEncodeNodeTarget(b *testing.B) {
	var buf []byte
	benchTargets(b, func(_ *testing.B, t *api.NodeTarget, _ []byte) { buf = api.AppendNodeTarget(buf[:0], t) })
}

func BenchmarkEncodeNodeTargetStdlib(b *testing.B) {
	benchTargets(b, func(b *testing.B, t *api.NodeTarget, _ []byte) {
		if _, err := json.Marshal(t); err != nil {
			b.Fatal(err)
		}
	})
}

// reportBody returns a heartbeat of a node running n tasks, with a report
// for every tenth of them, as a nodelet sends it.
func reportBody(b *testing.B, n int) []byte {
	r := api.ReportRequest{Usage: &api.NodeUsage{Total: api.Usage{CPU: 12000, Memory: 40 << 30}}}
	for i := range n {
		id := fmt.Sprintf("j%d/0/%d/1", 100+i, i)
		r.Usage.Tasks = append(r.Usage.Tasks, api.TaskUsage{TaskID: id, QoS: api.QoSOffline, Usage: api.Usage{CPU: 480, Memory: 200 << 20}})
		if i%10 == 0 {
			r.Reports = append(r.Reports, api.TaskReport{TaskID: id, State: api.TaskRunning, Reason: api.ReasonStarted,
				Time: time.Unix(1_800_000_000, 123456789).UTC(), Usage: api.Usage{CPU: 10, Memory: 1 << 20}})
		}
	}
	body, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkDecodeReportRequest measures the dispatcher's read of a
// heartbeat of 40 tasks with 4 reports, beside encoding/json's
// (BenchmarkDecodeReportRequestStdlib, strict as the server was).
func BenchmarkDecodeReportRequest(b *testing.B) {
	body := reportBody(b, 40)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if r, err := api.DecodeReportRequest(body); err != nil || len(r.Usage.Tasks) != 40 {
			b.Fatalf("decode: %+v, %v", r, err)
		}
	}
}

func BenchmarkDecodeReportRequestStdlib(b *testing.B) {
	body := reportBody(b, 40)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		var r api.ReportRequest
		if err := dec.Decode(&r); err != nil || len(r.Usage.Tasks) != 40 {
			b.Fatalf("decode: %+v, %v", r, err)
		}
	}
}

// BenchmarkDecodeReports measures the dispatcher's read of a busy node's
// Report call: a full batch of state changes and no usage.
func BenchmarkDecodeReports(b *testing.B) {
	var r api.ReportRequest
	for i := range 256 {
		r.Reports = append(r.Reports, api.TaskReport{TaskID: fmt.Sprintf("j%d/0/%d/1", 100+i/8, i%8), State: api.TaskSucceeded,
			Reason: api.ReasonExited, Time: time.Unix(1_800_000_000, 123456789).UTC(), Usage: api.Usage{CPU: 10, Memory: 1 << 20}})
	}
	body, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if r, err := api.DecodeReportRequest(body); err != nil || len(r.Reports) != 256 {
			b.Fatalf("decode: %d reports, %v", len(r.Reports), err)
		}
	}
}

// watchLine is a watch event of a loadgen-like job; brief, as
// WatchBrief's stream carries it (no task groups).
func watchLine(b *testing.B, brief bool) []byte {
	spec := api.JobSpec{Name: "sweep-1234", Queue: "batch", Labels: map[string]string{"loadgen-run": "r1"}, IdempotencyKey: "lg-r1/1234",
		Tasks: []api.TaskGroupSpec{{Count: 20, Pod: api.PodSpec{Containers: []api.ContainerSpec{{
			Image: api.Image{Rootfs: "/img"}, Command: []string{"/bin/work", "1234"}, Resources: api.Resources{CPU: 100, Memory: 64 << 20}}},
			Sim: &api.SimSpec{RunTime: api.Duration(time.Second)}}}}}
	spec.SetDefaults()
	counts := api.TaskCounts{Total: 20, Pending: 5, Active: 15}
	ev := api.WatchEvent{Index: 123456, Job: api.JobStatus{ID: "j1234", State: api.JobRunning, Submitted: time.Unix(1_800_000_000, 5).UTC(),
		Spec: spec, Tasks: counts, Groups: []api.GroupStatus{{Name: spec.Tasks[0].Name, TaskCounts: counts}}}}
	if brief {
		ev.Job.Spec.Tasks = nil
	}
	body, err := json.Marshal(ev)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkDecodeWatchEvent measures a watcher's read of one event (a
// loadgen run reads one per changed job), beside encoding/json's
// (BenchmarkDecodeWatchEventStdlib, what Client.Watch used before).
// Brief is the event of WatchBrief's stream.
func BenchmarkDecodeWatchEvent(b *testing.B) {
	for _, brief := range []bool{false, true} {
		b.Run(map[bool]string{false: "full", true: "brief"}[brief], func(b *testing.B) {
			line := watchLine(b, brief)
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			for b.Loop() {
				if ev, err := api.DecodeWatchEvent(line); err != nil || ev.Job.Tasks.Total != 20 {
					b.Fatalf("decode: %+v, %v", ev, err)
				}
			}
		})
	}
}

func BenchmarkDecodeWatchEventStdlib(b *testing.B) {
	line := watchLine(b, false)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		var ev api.WatchEvent
		if err := json.Unmarshal(line, &ev); err != nil || ev.Job.Tasks.Total != 20 {
			b.Fatalf("decode: %+v, %v", ev, err)
		}
	}
}

// BenchmarkEncodeReportRequest measures a nodelet's write of a heartbeat
// of 40 tasks with 4 reports, beside encoding/json's
// (BenchmarkEncodeReportRequestStdlib).
func BenchmarkEncodeReportRequest(b *testing.B) {
	r, err := api.DecodeReportRequest(reportBody(b, 40))
	if err != nil {
		b.Fatal(err)
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		if buf, err = api.AppendReportRequest(buf[:0], &r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeReportRequestStdlib(b *testing.B) {
	r, err := api.DecodeReportRequest(reportBody(b, 40))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(&r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeWatchEvent measures the dispatcher's write of one line of
// the watch stream, beside encoding/json's
// (BenchmarkEncodeWatchEventStdlib).
func BenchmarkEncodeWatchEvent(b *testing.B) {
	for _, brief := range []bool{false, true} {
		b.Run(map[bool]string{false: "full", true: "brief"}[brief], func(b *testing.B) {
			ev, err := api.DecodeWatchEvent(watchLine(b, brief))
			if err != nil {
				b.Fatal(err)
			}
			var buf []byte
			b.ReportAllocs()
			for b.Loop() {
				if buf, err = api.AppendWatchEvent(buf[:0], &ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeWatchEventStdlib(b *testing.B) {
	ev, err := api.DecodeWatchEvent(watchLine(b, false))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(&ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeJobsArray is BenchmarkDecodeJobs with the 1,000 jobs in a
// JSON array, as the submit benchmark sends them.
func BenchmarkDecodeJobsArray(b *testing.B) {
	body := append([]byte{'['}, bytes.ReplaceAll(bytes.TrimSuffix(ndjson(1000), []byte{'\n'}), []byte{'\n'}, []byte{','})...)
	body = append(body, ']')
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		jobs, err := api.DecodeJobs(body)
		if err != nil || len(jobs) != 1000 {
			b.Fatalf("decode: %d jobs, %v", len(jobs), err)
		}
	}
	b.ReportMetric(float64(1000*b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// submitReply returns the reply to a submission of 1,000 jobs.
func submitReply(b *testing.B) []byte {
	var r api.SubmitResponse
	for i := range 1000 {
		r.Jobs = append(r.Jobs, fmt.Sprintf("j%d", 1_000_000+i))
	}
	body, err := json.Marshal(r)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkDecodeSubmitResponse measures a client's read of the reply to
// a submission of 1,000 jobs, beside encoding/json's
// (BenchmarkDecodeSubmitResponseStdlib, what Client.SubmitBody used
// before).
func BenchmarkDecodeSubmitResponse(b *testing.B) {
	body := submitReply(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if r, err := api.DecodeSubmitResponse(body); err != nil || len(r.Jobs) != 1000 {
			b.Fatalf("decode: %d jobs, %v", len(r.Jobs), err)
		}
	}
}

func BenchmarkDecodeSubmitResponseStdlib(b *testing.B) {
	body := submitReply(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var r api.SubmitResponse
		if err := json.Unmarshal(body, &r); err != nil || len(r.Jobs) != 1000 {
			b.Fatalf("decode: %d jobs, %v", len(r.Jobs), err)
		}
	}
}

// taskPage is a page of 100 running tasks, as GET /v1/jobs/{id}/tasks
// answers a load generator following a job.
func taskPage() api.TaskList {
	l := api.TaskList{Next: "j12345/0/0/99"}
	at := time.Date(2030, 1, 1, 0, 0, 0, 123456789, time.UTC)
	for i := range 100 {
		l.Tasks = append(l.Tasks, api.TaskStatus{ID: fmt.Sprintf("j12345/0/%d/1", i), Group: "main", Index: int64(i), Attempt: 1,
			State: api.TaskRunning, Node: fmt.Sprintf("sim-%05d", i*37), Updated: at.Add(time.Duration(i) * time.Millisecond)})
	}
	return l
}

// BenchmarkDecodeTaskList measures a client's read of a page of 100
// tasks, beside encoding/json's (BenchmarkDecodeTaskListStdlib).
func BenchmarkDecodeTaskList(b *testing.B) {
	body, err := json.Marshal(taskPage())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if l, err := api.DecodeTaskList(body); err != nil || len(l.Tasks) != 100 {
			b.Fatalf("decode: %d tasks, %v", len(l.Tasks), err)
		}
	}
}

func BenchmarkDecodeTaskListStdlib(b *testing.B) {
	body, err := json.Marshal(taskPage())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var l api.TaskList
		if err := json.Unmarshal(body, &l); err != nil || len(l.Tasks) != 100 {
			b.Fatalf("decode: %d tasks, %v", len(l.Tasks), err)
		}
	}
}

// BenchmarkEncodeTaskList measures the dispatcher's write of a page of 100
// tasks, beside encoding/json's (BenchmarkEncodeTaskListStdlib).
func BenchmarkEncodeTaskList(b *testing.B) {
	l := taskPage()
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = api.AppendTaskList(buf[:0], &l); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeTaskListStdlib(b *testing.B) {
	l := taskPage()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(l); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateTaskReport measures the check a nodelet makes of every
// report it sends.
func BenchmarkValidateTaskReport(b *testing.B) {
	r := api.TaskReport{TaskID: "j123/0/5/1", State: api.TaskSucceeded, Reason: api.ReasonExited, Time: time.Unix(1_800_000_000, 0)}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
