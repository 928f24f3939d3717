package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// gen builds random valid specs that use every field.
type gen struct{ r *rand.Rand }

func (g gen) name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, g.r.IntN(1000)) }

// text returns a string exercising escapes and non-ASCII text.
func (g gen) text() string {
	pieces := []string{"a", "b c", `"q"`, `back\slash`, "tab\t", "nl\n", "é", "日本", "😀", "</script>", "\u2028"}
	var b strings.Builder
	for range g.r.IntN(4) + 1 {
		b.WriteString(pieces[g.r.IntN(len(pieces))])
	}
	return b.String()
}

func (g gen) labels() map[string]string {
	if g.r.IntN(3) == 0 {
		return nil
	}
	m := map[string]string{}
	for i := range g.r.IntN(4) + 1 {
		m[fmt.Sprintf("k%d/x.y-%d", i, g.r.IntN(9))] = g.text()
	}
	return m
}

func (g gen) constraints() []api.Constraint {
	ops := []api.ConstraintOp{api.OpIn, api.OpNotIn, api.OpExists, api.OpNotExists}
	var cs []api.Constraint
	for range g.r.IntN(3) {
		c := api.Constraint{Key: g.name("key"), Op: ops[g.r.IntN(len(ops))]}
		if c.Op == api.OpIn || c.Op == api.OpNotIn {
			c.Values = []string{g.text(), g.name("v")}
		}
		cs = append(cs, c)
	}
	return cs
}

func (g gen) resources() api.Resources {
	r := api.Resources{
		CPU:    g.r.Int64N(api.MaxCPU) + 1,
		Memory: g.r.Int64N(api.MaxMemory) + 1,
		GPUs:   g.r.Int64N(api.MaxGPUs + 1),
		Disk:   g.r.Int64N(api.MaxDisk + 1),
	}
	for i := range g.r.IntN(3) {
		r.Ports = append(r.Ports, api.Port{Name: fmt.Sprintf("p%d", i), Port: int32(g.r.IntN(65536)), Protocol: []string{"tcp", "udp"}[g.r.IntN(2)]})
	}
	return r
}

func (g gen) container(i int) api.ContainerSpec {
	c := api.ContainerSpec{
		Name:      fmt.Sprintf("c%d", i),
		Command:   []string{"/bin/" + g.name("tool"), g.text()},
		Resources: g.resources(),
	}
	// The ports of a pod have distinct names and static numbers.
	for k := range c.Resources.Ports {
		p := &c.Resources.Ports[k]
		p.Name = fmt.Sprintf("c%dp%d", i, k)
		if p.Port != 0 {
			p.Port = int32(1 + i*3 + k + 256*g.r.IntN(256))
		}
	}
	if g.r.IntN(2) == 0 {
		c.Image.Rootfs = "/images/" + g.name("root")
	} else {
		c.Image.OCILayout, c.Image.Ref = "/layouts/"+g.name("oci"), g.name("tag")
	}
	if g.r.IntN(2) == 0 {
		c.Args = []string{g.text(), "", g.text()}
	}
	if g.r.IntN(2) == 0 {
		c.Env = map[string]string{"HOME": "/root", "DATA_" + fmt.Sprint(g.r.IntN(9)): g.text()}
	}
	c.WorkingDir = "/work/" + g.name("dir")
	if g.r.IntN(2) == 0 {
		c.Security = &api.ContainerSecurity{ReadOnlyRootfs: g.r.IntN(2) == 0}
		if g.r.IntN(2) == 0 {
			c.Security.User = api.ContainerUser{UID: g.r.Int32N(70000) + 1, GID: g.r.Int32N(70000) + 1}
		}
	}
	return c
}

func (g gen) job() api.JobSpec {
	j := api.JobSpec{
		Name:          g.name("job"),
		Queue:         g.name("q"),
		Pool:          []string{"", "gpu"}[g.r.IntN(2)],
		Priority:      int32(g.r.IntN(api.MaxPriority + 1)),
		QoS:           []api.QoS{api.QoSOnline, api.QoSOffline}[g.r.IntN(2)],
		Labels:        g.labels(),
		Constraints:   g.constraints(),
		DistinctNodes: g.r.IntN(2) == 0,
		Retry: api.RetryPolicy{
			MaxAttempts: int32(g.r.IntN(api.MaxAttempts) + 1),
			Backoff:     api.Duration(g.r.Int64N(int64(time.Minute))),
		},
		MaxRunTime:     api.Duration(g.r.Int64N(int64(24 * time.Hour))),
		IdempotencyKey: g.name("key"),
		Appmaster:      g.r.IntN(2) == 0,
	}
	j.Retry.MaxBackoff = j.Retry.Backoff + api.Duration(g.r.Int64N(int64(time.Hour)))
	if g.r.IntN(2) == 0 {
		j.Policy = &api.Policy{
			Filters: []string{api.FilterLabels, api.FilterPool},
			Scorers: []api.ScorerRef{{Name: api.ScorerSpread, Weight: int32(g.r.IntN(api.MaxScorerWeight) + 1)}},
		}
	}
	for i := range g.r.IntN(3) + 1 {
		tg := api.TaskGroupSpec{Name: fmt.Sprintf("g%d", i), Count: g.r.Int64N(api.MaxTaskCount) + 1}
		if g.r.IntN(2) == 0 {
			tg.PreferredNodes = []string{g.name("node"), g.name("node")}
		}
		for k := range g.r.IntN(3) + 1 {
			tg.Pod.Containers = append(tg.Pod.Containers, g.container(k))
		}
		tg.Pod.SharePID = g.r.IntN(2) == 0
		if g.r.IntN(2) == 0 {
			tg.Pod.Sim = &api.SimSpec{RunTime: api.Duration(g.r.Int64N(int64(time.Hour))), ExitCode: int32(g.r.IntN(256)), Usage: g.simUsage()}
		}
		g.storage(&tg.Pod)
		j.Tasks = append(j.Tasks, tg)
	}
	return j
}

// storage gives p a network mode and volumes, some of the time, and its
// containers mounts of them.
func (g gen) storage(p *api.PodSpec) {
	p.Network.Mode = []string{"", api.NetworkBridge, api.NetworkHost, api.NetworkNone}[g.r.IntN(4)]
	for i := range g.r.IntN(3) {
		v := api.Volume{Name: fmt.Sprintf("v%d", i)}
		if g.r.IntN(2) == 0 {
			v.Scratch = &api.ScratchVolume{Size: g.r.Int64N(api.MaxDisk) + 1}
		} else {
			v.HostPath = &api.HostPathVolume{Path: "/srv/" + g.name("data"), ReadOnly: g.r.IntN(2) == 0}
		}
		p.Volumes = append(p.Volumes, v)
	}
	if len(p.Volumes) == 0 {
		return
	}
	for k := range p.Containers {
		c := &p.Containers[k]
		for i := range g.r.IntN(3) {
			v := p.Volumes[g.r.IntN(len(p.Volumes))]
			c.Mounts = append(c.Mounts, api.Mount{Volume: v.Name, Path: fmt.Sprintf("/mnt/%s%d", g.name("m"), i), ReadOnly: g.r.IntN(2) == 0})
		}
	}
}

func (g gen) capbox() api.CapboxRequest {
	r := api.CapboxRequest{
		Name:           g.name("box"),
		Count:          g.r.Int64N(1000) + 1,
		Resources:      g.resources(),
		AllOrNothing:   g.r.IntN(2) == 0,
		Constraints:    g.constraints(),
		DistinctNodes:  g.r.IntN(2) == 0,
		IdempotencyKey: g.name("k"),
	}
	if g.r.IntN(2) == 0 {
		r.PreferredNodes = []string{g.name("node")}
	}
	return r
}

// simUsage returns nil or a simulated pod's usage, with a peak half the
// time.
func (g gen) simUsage() *api.SimUsage {
	if g.r.IntN(3) == 0 {
		return nil
	}
	u := &api.SimUsage{CPU: g.r.Int64N(64_000), Memory: g.r.Int64N(1 << 40)}
	if g.r.IntN(2) == 0 {
		period := g.r.Int64N(int64(time.Hour)) + 2
		u.Peak = &api.SimPeak{CPU: g.r.Int64N(64_000), Memory: g.r.Int64N(1 << 40),
			Period: api.Duration(period), Length: api.Duration(g.r.Int64N(period-1) + 1)}
	}
	return u
}

func (g gen) captask() api.CapTaskSpec {
	t := api.CapTaskSpec{Capbox: fmt.Sprintf("j%d/0/%d/1", g.r.IntN(1000)+1, g.r.IntN(100)), Name: g.name("t")}
	for k := range g.r.IntN(3) + 1 {
		t.Pod.Containers = append(t.Pod.Containers, g.container(k))
	}
	t.Pod.SharePID = g.r.IntN(2) == 0
	if g.r.IntN(2) == 0 {
		t.Pod.Sim = &api.SimSpec{RunTime: api.Duration(g.r.Int64N(int64(time.Hour))), ExitCode: int32(g.r.IntN(256)), Usage: g.simUsage()}
	}
	g.storage(&t.Pod)
	t.SetDefaults()
	return t
}

// encode writes items as a JSON array (ndjson false) or as NDJSON, which for
// one item is a single object.
func encode[T any](t *testing.T, items []T, ndjson bool) []byte {
	t.Helper()
	var b bytes.Buffer
	if !ndjson {
		if err := json.NewEncoder(&b).Encode(items); err != nil {
			t.Fatal(err)
		}
	} else {
		enc := json.NewEncoder(&b)
		for _, it := range items {
			if err := enc.Encode(it); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.Bytes()
}

// TestRoundTrip checks that the decoder reads back exactly what
// encoding/json writes from the same types, for random specs using every
// field, in every framing: the struct tags and the decoder agree.
func TestRoundTrip(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	for i := range 300 {
		jobs := make([]api.JobSpec, g.r.IntN(4)+1)
		for k := range jobs {
			jobs[k] = g.job()
			jobs[k].SetDefaults()
		}
		if err := api.ValidateJobs(jobs); err != nil {
			t.Fatalf("generated jobs are invalid: %v", err)
		}
		body := encode(t, jobs, i%2 == 1)
		got, err := api.DecodeJobs(body)
		if err != nil {
			t.Fatalf("decode: %v\nbody: %s", err, body)
		}
		if !reflect.DeepEqual(got, jobs) {
			t.Fatalf("round trip differs:\n got %+v\nwant %+v\nbody: %s", got, jobs, body)
		}

		boxes := []api.CapboxRequest{g.capbox(), g.capbox()}
		body = encode(t, boxes, i%2 == 0)
		gotBoxes, err := api.DecodeCapboxRequests(body)
		if err != nil {
			t.Fatalf("decode capboxes: %v\nbody: %s", err, body)
		}
		if !reflect.DeepEqual(gotBoxes, boxes) {
			t.Fatalf("capbox round trip differs:\n got %+v\nwant %+v", gotBoxes, boxes)
		}

		tasks := []api.CapTaskSpec{g.captask(), g.captask()}
		body = encode(t, tasks, i%2 == 1)
		gotTasks, err := api.DecodeCapTasks(body)
		if err != nil {
			t.Fatalf("decode capbox tasks: %v\nbody: %s", err, body)
		}
		if !reflect.DeepEqual(gotTasks, tasks) {
			t.Fatalf("capbox task round trip differs:\n got %+v\nwant %+v", gotTasks, tasks)
		}
	}
}

// TestEveryFieldDecoded guards the round trip against a field the generator
// forgets: every exported field of the spec types must be non-zero in some
// generated value, so a field the decoder drops cannot go unnoticed.
func TestEveryFieldDecoded(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	seen := map[string]bool{}
	for range 200 {
		markSet(reflect.ValueOf(g.job()), "JobSpec", seen)
		markSet(reflect.ValueOf(g.capbox()), "CapboxRequest", seen)
		markSet(reflect.ValueOf(g.captask()), "CapTaskSpec", seen)
	}
	for _, typ := range []reflect.Type{reflect.TypeFor[api.JobSpec](), reflect.TypeFor[api.CapboxRequest](), reflect.TypeFor[api.CapTaskSpec]()} {
		checkAllSet(t, typ, typ.Name(), seen)
	}
}

func markSet(v reflect.Value, path string, seen map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			markSet(v.Elem(), path, seen)
		}
	case reflect.Slice:
		for i := range v.Len() {
			markSet(v.Index(i), path, seen)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			return // a value: set or not, as a whole
		}
		for i := range v.NumField() {
			f := v.Type().Field(i)
			p := path + "." + f.Name
			if !v.Field(i).IsZero() {
				seen[p] = true
			}
			markSet(v.Field(i), p, seen)
		}
	}
}

func checkAllSet(t *testing.T, typ reflect.Type, path string, seen map[string]bool) {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
	}
	if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]() {
		return
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		p := path + "." + f.Name
		if !seen[p] {
			t.Errorf("no generated spec sets %s: the round trip does not cover it", p)
		}
		checkAllSet(t, f.Type, p, seen)
	}
}

// target returns a random node target that sets every field.
func (g gen) target() api.NodeTarget {
	t := api.NodeTarget{Generation: g.r.Uint64N(1 << 62), Base: g.r.Uint64N(1 << 40)}
	for range g.r.IntN(4) + 1 {
		j := g.job()
		tg := j.Tasks[0]
		t.Pods = append(t.Pods, api.TargetPod{
			TaskID: g.name("j") + "/0/1/1", Job: g.name("j"), JobName: j.Name, Count: tg.Count, Group: tg.Name, QoS: j.QoS, Priority: j.Priority,
			Pod: tg.Pod, MaxRunTime: j.MaxRunTime, Capbox: g.r.IntN(2) == 0, InCapbox: g.name("box"), Token: g.name("sjt1."),
			Ports: g.assignedPorts(),
		})
	}
	t.Removed = []string{g.name("gone"), g.name("gone")}
	return t
}

// TestDecodeNodeTarget checks DecodeNodeTarget against encoding/json on
// random targets that set every field, and that it refuses what
// encoding/json with unknown fields disallowed would, naming the path.
func TestDecodeNodeTarget(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	seen := map[string]bool{}
	for range 300 {
		want := g.target()
		markSet(reflect.ValueOf(want), "NodeTarget", seen)
		body, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.DecodeNodeTarget(body)
		if err != nil {
			t.Fatalf("decode: %v\nbody: %s", err, body)
		}
		var std api.NodeTarget
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, std) {
			t.Fatalf("target round trip differs:\n got %+v\nwant %+v\nbody: %s", got, want, body)
		}
	}
	checkAllSet(t, reflect.TypeFor[api.NodeTarget](), "NodeTarget", seen)
	if got, err := api.DecodeNodeTarget([]byte(`{"generation":3,"pods":null}`)); err != nil || got.Generation != 3 || got.Pods != nil {
		t.Fatalf("null pods: %+v, %v", got, err)
	}
	for body, want := range map[string]string{
		``:                                     "empty body",
		`[]`:                                   "want an object",
		`{"generation":1}x`:                    "trailing data",
		`{"generation":-1}`:                    "generation",
		`{"generation":"1"}`:                   "generation",
		`{"pods":[{"task_id":"a","bogus":1}]}`: "pods[0].bogus",
		`{"pods":[{"pod":{"containers":[{"resources":{"cpu":"lots"}}]}}]}`: "pods[0].pod.containers[0].resources.cpu",
		`{"generation":1,"generation":2}`:                                  "duplicate",
		`{"pods":[{"max_run_time":"soon"}]}`:                               "pods[0].max_run_time",
		`{"pods":[{"count":-1}]}`:                                          "pods[0].count",
		`{"pods":[{"job_name":7}]}`:                                        "pods[0].job_name",
	} {
		if _, err := api.DecodeNodeTarget([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeNodeTarget(%q) = %v, want an error saying %q", body, err, want)
		}
	}
}

// groupTarget returns a random target whose pods come in runs that share
// one spec's memory, as the dispatcher's pods of one task group do, with
// some runs of equal specs that share nothing.
func (g gen) groupTarget() api.NodeTarget {
	t := api.NodeTarget{Generation: g.r.Uint64N(1 << 62)}
	for range g.r.IntN(4) + 1 {
		j := g.job()
		spec, name, count := j.Tasks[0].Pod, j.Name, j.Tasks[0].Count
		if g.r.IntN(4) == 0 {
			name, count = "", 0 // none, as in a bare target
		}
		for i := range g.r.IntN(5) + 1 {
			pod := spec
			jobName, jobCount := name, count
			switch g.r.IntN(6) {
			case 0:
				// Its containers shared, the rest not.
				pod.Sim = &api.SimSpec{RunTime: api.Duration(g.r.IntN(5)) * api.Duration(time.Second)}
			case 1:
				pod.SharePID = !pod.SharePID
			case 4:
				pod.Network.Mode = api.NetworkNone
			case 5:
				pod.Volumes = slices.Clone(pod.Volumes)
			case 3:
				// Another group of the same spec: its own name or count.
				if g.r.IntN(2) == 0 {
					jobName = g.name("other")
				} else {
					jobCount++
				}
			case 2:
				// Equal, but its own memory.
				var c api.PodSpec
				b, _ := json.Marshal(spec)
				if err := json.Unmarshal(b, &c); err != nil {
					panic(err)
				}
				pod = c
			}
			t.Pods = append(t.Pods, api.TargetPod{TaskID: fmt.Sprintf("%s/0/%d/1", g.name("j"), i), Job: g.name("j"),
				JobName: jobName, Count: jobCount, Pod: pod})
		}
	}
	return t
}

// TestNodeTargetSharedSpecs checks the target encoder and decoder on pods
// that share specs: the encoder writes each as encoding/json does, and
// the decoder reads each as encoding/json does, the pods of one spec text
// sharing one decoded spec.
func TestNodeTargetSharedSpecs(t *testing.T) {
	if n := reflect.TypeFor[api.PodSpec]().NumField(); n != 5 {
		t.Fatalf("PodSpec has %d fields: samePodSpec in encode.go must compare the new ones", n)
	}
	g := gen{seedtest.Rand(t)}
	for range 300 {
		target := g.groupTarget()
		want, err := json.Marshal(target)
		if err != nil {
			t.Fatal(err)
		}
		if got := api.AppendNodeTarget(nil, &target); !bytes.Equal(got, want) {
			t.Fatalf("encode:\n got %s\nwant %s", got, want)
		}
		got, err := api.DecodeNodeTarget(want)
		if err != nil {
			t.Fatalf("decode: %v\nbody: %s", err, want)
		}
		var std api.NodeTarget
		if err := json.Unmarshal(want, &std); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, std) {
			t.Fatalf("decode differs:\n got %+v\nwant %+v\nbody: %s", got, std, want)
		}
		for i := 1; i < len(got.Pods); i++ {
			a, b := &got.Pods[i-1].Pod, &got.Pods[i].Pod
			if reflect.DeepEqual(a, b) && len(a.Containers) > 0 && &a.Containers[0] != &b.Containers[0] {
				t.Fatalf("pods %d and %d have the same spec but were decoded twice", i-1, i)
			}
		}
	}
	// A spec with a problem is read again for each pod, so that each
	// pod's problem is named.
	spec := `{"containers":[{"resources":{"cpu":"lots"}}]}`
	_, err := api.DecodeNodeTarget([]byte(`{"pods":[{"pod":` + spec + `},{"pod":` + spec + `}]}`))
	for _, want := range []string{"pods[0].pod.containers[0].resources.cpu", "pods[1].pod.containers[0].resources.cpu"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("two pods with a bad spec: %v, want an error naming %s", err, want)
		}
	}
	// A spec that begins like the last one but is longer is its own.
	body := `{"pods":[{"pod":{"containers":[]}},{"pod":{"containers":[] ,"share_pid":true}},{"pod":{"containers":[]}}]}`
	got, err := api.DecodeNodeTarget([]byte(body))
	if err != nil || len(got.Pods) != 3 || got.Pods[0].Pod.SharePID || !got.Pods[1].Pod.SharePID || got.Pods[2].Pod.SharePID {
		t.Fatalf("decode %s: %+v, %v", body, got, err)
	}
}

// reportRequest returns a random report request that sets every field.
func (g gen) reportRequest() api.ReportRequest {
	var r api.ReportRequest
	usage := func() api.Usage { return api.Usage{CPU: g.r.Int64N(64000) + 1, Memory: g.r.Int64N(1<<40) + 1} }
	for range g.r.IntN(4) + 1 {
		r.Reports = append(r.Reports, api.TaskReport{
			TaskID: g.name("j") + "/0/1/1", State: api.TaskState(g.r.IntN(int(api.TaskLost)) + 1),
			Reason: api.TaskReason(g.name("reason")), ExitCode: int32(g.r.IntN(256)) - 128, Message: g.text(),
			Time:  time.Unix(g.r.Int64N(1<<32), g.r.Int64N(1e9)).UTC(),
			Usage: usage(),
		})
	}
	r.Usage = &api.NodeUsage{Total: usage(), Online: usage(), Offline: usage()}
	for range g.r.IntN(3) + 1 {
		r.Usage.Tasks = append(r.Usage.Tasks, api.TaskUsage{TaskID: g.name("j") + "/0/2/1", QoS: api.QoSOnline, Usage: usage()})
	}
	if g.r.IntN(3) > 0 { // a node without an overcommit controller sends none
		lo := g.r.Int64N(1000) + 1
		hi := lo + g.r.Int64N(64000) + 1
		guaranteed := g.r.Int64N(1<<40) + 1
		r.Usage.Overcommit = &api.OvercommitStatus{
			CPUQuota: lo + g.r.Int64N(hi-lo+1), CPUMin: lo, CPUMax: hi,
			MemoryLimit: guaranteed + g.r.Int64N(1<<40) + 1, MemoryGuaranteed: guaranteed,
			Decided: time.Unix(g.r.Int64N(1<<32), g.r.Int64N(1e9)).UTC(),
		}
	}
	return r
}

// TestDecodeReportRequest checks DecodeReportRequest against
// encoding/json on random requests that set every field, and its
// refusals, each naming the path.
func TestDecodeReportRequest(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	seen := map[string]bool{}
	for range 300 {
		want := g.reportRequest()
		markSet(reflect.ValueOf(want), "ReportRequest", seen)
		body, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.DecodeReportRequest(body)
		if err != nil {
			t.Fatalf("decode: %v\nbody: %s", err, body)
		}
		var std api.ReportRequest
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, std) {
			t.Fatalf("report round trip differs:\n got %+v\nwant %+v\n std %+v\nbody: %s", got, want, std, body)
		}
	}
	checkAllSet(t, reflect.TypeFor[api.ReportRequest](), "ReportRequest", seen)
	// With and without an overcommit status: none is no member at all.
	withStatus, without := 0, 0
	for range 300 {
		r := g.reportRequest()
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.DecodeReportRequest(body)
		if err != nil || got.Usage == nil || (got.Usage.Overcommit == nil) != (r.Usage.Overcommit == nil) {
			t.Fatalf("decode %s: %+v, %v", body, got.Usage, err)
		}
		if r.Usage.Overcommit == nil {
			without++
			if bytes.Contains(body, []byte(`"overcommit"`)) {
				t.Fatalf("usage without an overcommit status has the member: %s", body)
			}
		} else {
			withStatus++
			if err := got.Usage.Validate(); err != nil {
				t.Fatalf("a generated status is invalid: %v\nbody: %s", err, body)
			}
		}
	}
	if withStatus == 0 || without == 0 {
		t.Fatalf("%d requests with an overcommit status, %d without: want both", withStatus, without)
	}
	for body, want := range map[string]api.ReportRequest{
		`{"reports":[]}`:                           {Reports: []api.TaskReport{}},
		`{"reports":null,"usage":null}`:            {},
		`{"reports":[{"state":null,"time":null}]}`: {Reports: []api.TaskReport{{}}},

		// An overcommit status of null is none; members left out are zero.
		`{"usage":{"overcommit":null}}`:                             {Usage: &api.NodeUsage{}},
		`{"usage":{"overcommit":{"cpu_quota":500,"decided":null}}}`: {Usage: &api.NodeUsage{Overcommit: &api.OvercommitStatus{CPUQuota: 500}}},
	} {
		got, err := api.DecodeReportRequest([]byte(body))
		var std api.ReportRequest
		if jerr := json.Unmarshal([]byte(body), &std); jerr != nil || err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, std) {
			t.Errorf("DecodeReportRequest(%s) = %+v, %v; want %+v (encoding/json: %+v, %v)", body, got, err, want, std, jerr)
		}
	}
	for body, want := range map[string]string{
		``:                                   "empty body",
		`[]`:                                 "want an object",
		`{"reports":[]}x`:                    "trailing data",
		`{"reports":[{"task_id":1}]}`:        "reports[0].task_id",
		`{"reports":[{"state":"napping"}]}`:  "reports[0].state",
		`{"reports":[{"time":"yesterday"}]}`: "reports[0].time",
		`{"reports":[{"exit_code":1e10}]}`:   "reports[0].exit_code",
		`{"usage":{"tasks":[{"cpu":"1"}]}}`:  "usage.tasks[0].cpu",
		`{"usage":{"total":{"gpu":1}}}`:      "usage.total.gpu",
		`{"usage":{},"usage":{}}`:            "duplicate",
		`{"reports":[{"state":"running","state":"failed"}]}`: "duplicate",

		`{"usage":{"overcommit":{"cpu_quota":"1"}}}`:             "usage.overcommit.cpu_quota",
		`{"usage":{"overcommit":{"cpu_max":1.5}}}`:               "usage.overcommit.cpu_max",
		`{"usage":{"overcommit":{"decided":"yesterday"}}}`:       "usage.overcommit.decided",
		`{"usage":{"overcommit":{"gpu_quota":1}}}`:               "usage.overcommit.gpu_quota",
		`{"usage":{"overcommit":[]}}`:                            "usage.overcommit",
		`{"usage":{"overcommit":{"cpu_quota":1,"cpu_quota":2}}}`: "duplicate",
		`{"usage":{"overcommit":{},"overcommit":{}}}`:            "duplicate",
	} {
		if _, err := api.DecodeReportRequest([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeReportRequest(%q) = %v, want an error saying %q", body, err, want)
		}
	}
}

// submitResponse returns a random submit reply of up to 2,000 IDs, some
// of them existing, one at times with escapes and non-ASCII text.
func (g gen) submitResponse() api.SubmitResponse {
	var r api.SubmitResponse
	for i := range g.r.IntN(2000) {
		r.Jobs = append(r.Jobs, fmt.Sprintf("j%d", g.r.IntN(1<<40)))
		if g.r.IntN(10) == 0 {
			r.Existing = append(r.Existing, i)
		}
	}
	if len(r.Jobs) > 0 && g.r.IntN(3) == 0 {
		r.Jobs[g.r.IntN(len(r.Jobs))] = g.text()
	}
	return r
}

// TestDecodeSubmitResponse checks DecodeSubmitResponse against
// encoding/json on random replies, and its refusals, each naming the path.
func TestDecodeSubmitResponse(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	for range 200 {
		want := g.submitResponse()
		body, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.DecodeSubmitResponse(body)
		if err != nil {
			t.Fatalf("decode: %v\nbody: %s", err, body)
		}
		var std api.SubmitResponse
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, std) {
			t.Fatalf("reply round trip differs:\n got %+v\nwant %+v\n std %+v\nbody: %s", got, want, std, body)
		}
	}
	for body, want := range map[string]api.SubmitResponse{
		`{"jobs":[]}`:                               {Jobs: []string{}},
		`{"jobs":null,"existing":null}`:             {},
		`{"existing":[]}`:                           {Existing: []int{}},
		`{"jobs":["j1"],"newer":{"a":[1,{"b":2}]}}`: {Jobs: []string{"j1"}},
		" {\"existing\":[0],\"jobs\":[\"j7\"]}\n":   {Jobs: []string{"j7"}, Existing: []int{0}},
	} {
		got, err := api.DecodeSubmitResponse([]byte(body))
		var std api.SubmitResponse
		if jerr := json.Unmarshal([]byte(body), &std); jerr != nil || err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, std) {
			t.Errorf("DecodeSubmitResponse(%s) = %+v, %v; want %+v (encoding/json: %+v, %v)", body, got, err, want, std, jerr)
		}
	}
	for body, want := range map[string]string{
		``:                      "empty body",
		`[]`:                    "want an object",
		`{"jobs":[]}x`:          "trailing data",
		`{"jobs":"j1"}`:         "jobs: want an array",
		`{"jobs":["j1",2]}`:     "jobs[1]",
		`{"existing":[-1]}`:     "existing[0]",
		`{"existing":["0"]}`:    "existing[0]",
		`{"jobs":[],"jobs":[]}`: "duplicate",
		`{"jobs":["j1"`:         "jobs",
	} {
		if _, err := api.DecodeSubmitResponse([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeSubmitResponse(%q) = %v, want an error saying %q", body, err, want)
		}
	}
}

// watchEvent returns a random watch event that sets every field.
func (g gen) watchEvent() api.WatchEvent {
	counts := func() api.TaskCounts {
		return api.TaskCounts{Total: g.r.Int64N(1e6) + 1, Pending: g.r.Int64N(1e6) + 1, Retrying: g.r.Int64N(100) + 1,
			Active: g.r.Int64N(1e6) + 1, Succeeded: g.r.Int64N(1e6) + 1, Failed: g.r.Int64N(100) + 1, Killed: g.r.Int64N(100) + 1}
	}
	j := api.JobStatus{ID: g.name("j"), State: api.JobState(g.name("state")),
		Submitted: time.Unix(g.r.Int64N(1<<32), g.r.Int64N(1e9)).UTC(), Spec: g.job(), Appmaster: g.name("am"), Tasks: counts()}
	for range g.r.IntN(3) + 1 {
		j.Groups = append(j.Groups, api.GroupStatus{Name: g.name("g"), TaskCounts: counts()})
		j.Pending = append(j.Pending, api.PendingReason{Group: g.name("g"), Tasks: g.r.Int64N(1000) + 1, Reason: g.text()})
	}
	if g.r.IntN(2) == 0 { // a forgotten job's summary
		j.History = true
		j.Started = time.Unix(g.r.Int64N(1<<32), g.r.Int64N(1e9)).UTC()
		j.Ended = time.Unix(g.r.Int64N(1<<32), g.r.Int64N(1e9)).UTC()
		j.FirstFailure = &api.TaskFailure{Task: g.name("j1/0/"), State: api.TaskFailed + api.TaskState(g.r.IntN(3)),
			Reason: api.TaskReason(g.name("r")), ExitCode: g.r.Int32N(255) + 1, At: time.Unix(g.r.Int64N(1<<32), g.r.Int64N(1e9)).UTC()}
	}
	return api.WatchEvent{Index: g.r.Uint64N(1 << 62), Job: j}
}

// TestDecodeWatchEvent checks DecodeWatchEvent against encoding/json on
// random events that set every field; that it skips members it does not
// know (a newer server's), as encoding/json does; and its refusals, each
// naming the path.
func TestDecodeWatchEvent(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	seen := map[string]bool{}
	for range 300 {
		want := g.watchEvent()
		markSet(reflect.ValueOf(want), "WatchEvent", seen)
		body, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.DecodeWatchEvent(body)
		if err != nil {
			t.Fatalf("decode: %v\nbody: %s", err, body)
		}
		var std api.WatchEvent
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, std) {
			t.Fatalf("watch event round trip differs:\n got %+v\nwant %+v\n std %+v\nbody: %s", got, want, std, body)
		}
	}
	checkAllSet(t, reflect.TypeFor[api.WatchEvent](), "WatchEvent", seen)
	for body, want := range map[string]api.WatchEvent{
		`{"index":7,"job":{"id":"j1","groups":null,"pending_diagnosis":null}}`: {Index: 7, Job: api.JobStatus{ID: "j1"}},
		`{"index":7,"new":{"a":[1,{"b":null}]},"job":{"id":"j1","tasks":{"total":3,"lost":1},"groups":[{"name":"g","total":3,"x":"y"}],"spec":{"name":"n","future":true}}}`: {
			Index: 7, Job: api.JobStatus{ID: "j1", Tasks: api.TaskCounts{Total: 3}, Groups: []api.GroupStatus{{Name: "g", TaskCounts: api.TaskCounts{Total: 3}}},
				Spec: api.JobSpec{Name: "n"}}},
	} {
		got, err := api.DecodeWatchEvent([]byte(body))
		var std api.WatchEvent
		if jerr := json.Unmarshal([]byte(body), &std); jerr != nil || err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, std) {
			t.Errorf("DecodeWatchEvent(%s) = %+v, %v; want %+v (encoding/json: %+v, %v)", body, got, err, want, std, jerr)
		}
	}
	for body, want := range map[string]string{
		``:                                     "empty body",
		`[]`:                                   "want an object",
		`{"index":1}x`:                         "trailing data",
		`{"index":-1}`:                         "index",
		`{"job":{"id":1}}`:                     "job.id",
		`{"job":{"submitted":"yesterday"}}`:    "job.submitted",
		`{"job":{"tasks":{"total":"3"}}}`:      "job.tasks.total",
		`{"job":{"groups":[{"name":2}]}}`:      "job.groups[0].name",
		`{"job":{"pending_diagnosis":[1]}}`:    "job.pending_diagnosis[0]",
		`{"job":{"spec":{"priority":"high"}}}`: "job.spec.priority",
		`{"index":1,"index":2}`:                "duplicate",
		`{"job":{"id":"a"`:                     "",
	} {
		if _, err := api.DecodeWatchEvent([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeWatchEvent(%q) = %v, want an error saying %q", body, err, want)
		}
	}
}

// assignedPorts returns one to three ports as the dispatcher assigns
// them: named, numbered, with a protocol.
func (g gen) assignedPorts() []api.Port {
	ps := make([]api.Port, g.r.IntN(3)+1)
	for i := range ps {
		ps[i] = api.Port{Name: g.name("p"), Port: int32(g.r.IntN(65535) + 1), Protocol: []string{"tcp", "udp"}[g.r.IntN(2)]}
	}
	return ps
}

// taskList returns a random page of up to 300 tasks that set every field,
// with a next cursor at times; IDs and nodes now and then need escapes.
func (g gen) taskList() api.TaskList {
	l := api.TaskList{Tasks: []api.TaskStatus{}}
	for range g.r.IntN(300) {
		l.Tasks = append(l.Tasks, api.TaskStatus{ID: g.name("j") + "/0/1/1", Group: g.name("g"), Index: g.r.Int64N(1 << 40),
			Attempt: g.r.Int64N(100) + 1, State: api.TaskState(g.r.IntN(int(api.TaskLost)) + 1), Node: g.name("n"),
			Host: g.name("h"), Ports: g.assignedPorts(),
			Reason: api.TaskReason(g.name("r")), ExitCode: g.r.Int32() - 1<<30, Updated: time.Unix(g.r.Int64N(1<<32), g.r.Int64N(1e9)).UTC()})
	}
	if len(l.Tasks) > 0 && g.r.IntN(3) == 0 {
		l.Tasks[g.r.IntN(len(l.Tasks))].Node = g.text()
	}
	if g.r.IntN(2) == 0 {
		l.Next = g.name("j") + "/0/1/1"
	}
	return l
}

// TestDecodeTaskList checks DecodeTaskList against encoding/json on random
// pages that set every field; that it skips members it does not know, as
// encoding/json does; and its refusals, each naming the path.
func TestDecodeTaskList(t *testing.T) {
	g := gen{seedtest.Rand(t)}
	seen := map[string]bool{}
	for range 200 {
		want := g.taskList()
		markSet(reflect.ValueOf(want), "TaskList", seen)
		body, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := api.DecodeTaskList(body)
		if err != nil {
			t.Fatalf("decode: %v\nbody: %s", err, body)
		}
		var std api.TaskList
		if err := json.Unmarshal(body, &std); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, std) {
			t.Fatalf("task list round trip differs:\n got %+v\nwant %+v\n std %+v\nbody: %s", got, want, std, body)
		}
	}
	checkAllSet(t, reflect.TypeFor[api.TaskList](), "TaskList", seen)
	for body, want := range map[string]api.TaskList{
		`{"tasks":null}`: {},
		`{"tasks":[{"id":"j1/0/0/1","state":null,"future":[1,{"a":null}]}],"next":"j1/0/0/1","more":true}`: {
			Tasks: []api.TaskStatus{{ID: "j1/0/0/1"}}, Next: "j1/0/0/1"},
	} {
		got, err := api.DecodeTaskList([]byte(body))
		var std api.TaskList
		if jerr := json.Unmarshal([]byte(body), &std); jerr != nil || err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got, std) {
			t.Errorf("DecodeTaskList(%s) = %+v, %v; want %+v (encoding/json: %+v, %v)", body, got, err, want, std, jerr)
		}
	}
	for body, want := range map[string]string{
		``:                                    "empty body",
		`[]`:                                  "want an object",
		`{"tasks":[]}x`:                       "trailing data",
		`{"tasks":{}}`:                        "tasks",
		`{"tasks":[{"index":1.5}]}`:           "tasks[0].index",
		`{"tasks":[{},{"state":"asleep"}]}`:   "tasks[1].state",
		`{"tasks":[{"exit_code":1e10}]}`:      "tasks[0].exit_code",
		`{"tasks":[{"updated":"noon"}]}`:      "tasks[0].updated",
		`{"tasks":[{"node":7}]}`:              "tasks[0].node",
		`{"next":"a","next":"b"}`:             "duplicate",
		`{"tasks":[{"id":"j1/0/0/1"}],"next"`: "",
	} {
		if _, err := api.DecodeTaskList([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("DecodeTaskList(%q) = %v, want an error saying %q", body, err, want)
		}
	}
}
