package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// fillRandom sets every field reachable from v (a settable value) to a
// random non-zero value: strings, integers, bools, slices and maps of one to
// three elements, pointers to filled values. It fails on a kind it does not
// know, so that a new kind of field in api cannot go unfilled.
func fillRandom(t *testing.T, r *rand.Rand, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(randText(r))
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		bits := v.Type().Bits()
		n := int64(r.Uint64() >> (64 - bits)) // any value of the type, negative too
		if n == 0 {
			n = 1
		}
		v.SetInt(n)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		v.SetUint(r.Uint64()>>(64-v.Type().Bits()) | 1)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillRandom(t, r, v.Elem(), path)
	case reflect.Slice:
		n := 1 + r.IntN(3)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fillRandom(t, r, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 1 + r.IntN(3) {
			k := reflect.New(v.Type().Key()).Elem()
			fillRandom(t, r, k, path+"{key}")
			k.SetString(fmt.Sprintf("%d-%s", i, k.String())) // distinct keys
			e := reflect.New(v.Type().Elem()).Elem()
			fillRandom(t, r, e, path+"{value}")
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			fillRandom(t, r, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	default:
		t.Fatalf("%s: fillRandom does not know kind %s: teach it, and the spec codec the field", path, v.Kind())
	}
}

// checkNoZero fails for any field reachable from v that is zero.
func checkNoZero(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if v.IsZero() {
		t.Fatalf("%s is zero", path)
	}
	switch v.Kind() {
	case reflect.Pointer:
		checkNoZero(t, v.Elem(), path)
	case reflect.Slice:
		for i := range v.Len() {
			checkNoZero(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			checkNoZero(t, it.Value(), path+"{value}")
		}
	case reflect.Struct:
		for i := range v.NumField() {
			checkNoZero(t, v.Field(i), path+"."+v.Type().Field(i).Name)
		}
	}
}

func randText(r *rand.Rand) string {
	pieces := []string{"a", "b c", `"q"`, `back\slash`, "tab\t", "nl\n", "é", "日本", "😀", "\x00", "\xff"}
	var b strings.Builder
	for range 1 + r.IntN(4) {
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

// specRoundTrip encodes s, decodes it with a fresh and with a sharing
// decoder, checks both consumed the encoding exactly, and returns the
// decoded spec and the encoding.
func specRoundTrip(t *testing.T, s *api.JobSpec) (api.JobSpec, []byte) {
	t.Helper()
	var e enc
	appendSpec(&e, s)
	d := dec{b: e.b}
	got := decodeSpec(&d)
	if err := d.done("spec"); err != nil {
		t.Fatalf("decode: %v", err)
	}
	sd := sharedDec(e.b)
	shared := newSpecDecoder(4).decode(&sd)
	if err := sd.done("spec"); err != nil {
		t.Fatalf("shared decode: %v", err)
	}
	if !reflect.DeepEqual(got, shared) {
		t.Fatalf("sharing decoder differs:\n got %+v\nwant %+v", shared, got)
	}
	var again enc
	appendSpec(&again, &got)
	if !bytes.Equal(again.b, e.b) {
		t.Fatalf("re-encoding differs:\n got %x\nwant %x", again.b, e.b)
	}
	return got, e.b
}

// TestSpecCodecEveryField guards against a field added to api.JobSpec (or a
// type it contains) that the codec drops: every field, at any depth, is set
// to a random non-zero value by reflection and must survive the round trip.
func TestSpecCodecEveryField(t *testing.T) {
	r := seedtest.Rand(t)
	for range 200 {
		var s api.JobSpec
		fillRandom(t, r, reflect.ValueOf(&s).Elem(), "JobSpec")
		checkNoZero(t, reflect.ValueOf(s), "JobSpec")
		got, _ := specRoundTrip(t, &s)
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("round trip differs:\n got %#v\nwant %#v", got, s)
		}
	}
}

// TestSpecCodecNilAndEmpty pins the choice for empty collections: nil and
// empty slices and maps, and zero-valued pointees, decode as api.DecodeJobs
// reads what encoding/json writes for them.
func TestSpecCodecNilAndEmpty(t *testing.T) {
	s := api.JobSpec{
		Name: "j", Labels: map[string]string{}, Constraints: []api.Constraint{},
		Policy: &api.Policy{Filters: []string{}, Scorers: []api.ScorerRef{}},
		Tasks: []api.TaskGroupSpec{{Count: 1, PreferredNodes: []string{}, Pod: api.PodSpec{
			Sim: &api.SimSpec{},
			Containers: []api.ContainerSpec{{
				Image: api.Image{Rootfs: "/r"}, Command: []string{"/x"}, Args: []string{}, Env: map[string]string{},
				Resources: api.Resources{CPU: 1, Memory: 1, Ports: []api.Port{}},
			}},
		}}},
	}
	got, _ := specRoundTrip(t, &s)
	got.SetDefaults()
	if want := viaJSON(t, &s); !reflect.DeepEqual(got, want) {
		t.Fatalf("binary and JSON round trips differ:\n got %#v\nwant %#v", got, want)
	}
	if got.Labels != nil || got.Policy == nil || got.Policy.Filters != nil || got.Tasks[0].Pod.Sim == nil || got.Tasks[0].Pod.Containers[0].Env != nil {
		t.Fatalf("unexpected nil-ness: %#v", got)
	}
}

// viaJSON is what the FSM made of s before the binary encoding: s as
// json.Marshal writes it, read back by api.DecodeJobs (with defaults).
func viaJSON(t *testing.T, s *api.JobSpec) api.JobSpec {
	t.Helper()
	js, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := api.DecodeJobs(js)
	if err != nil {
		t.Fatalf("JSON path: %v\n%s", err, js)
	}
	return specs[0]
}

// specGen builds random valid specs that use every field, with nil, empty
// and zero values mixed in.
type specGen struct{ r *rand.Rand }

func (g specGen) name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, g.r.IntN(1000)) }

// text is free-form valid UTF-8 without NUL bytes (encoding/json would
// rewrite invalid UTF-8, and DecodeJobs rejects NUL bytes).
func (g specGen) text() string {
	pieces := []string{"a", "b c", `"q"`, `back\slash`, "tab\t", "nl\n", "é", "日本", "😀", "</script>", "\u2028"}
	var b strings.Builder
	for range g.r.IntN(4) + 1 {
		b.WriteString(pieces[g.r.IntN(len(pieces))])
	}
	return b.String()
}

func (g specGen) maybe() bool { return g.r.IntN(2) == 0 }

func (g specGen) strMap(key func(int) string, val func() string) map[string]string {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return map[string]string{}
	}
	m := map[string]string{}
	for i := range g.r.IntN(5) + 1 {
		m[key(i)] = val()
	}
	return m
}

func (g specGen) strs(f func() string) []string {
	switch g.r.IntN(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	vs := make([]string, g.r.IntN(3)+1)
	for i := range vs {
		vs[i] = f()
	}
	return vs
}

func (g specGen) job() api.JobSpec {
	j := api.JobSpec{
		Name:          g.name("job"),
		Pool:          []string{"", "gpu"}[g.r.IntN(2)],
		Priority:      int32(g.r.IntN(api.MaxPriority + 1)),
		Labels:        g.strMap(func(i int) string { return fmt.Sprintf("k%d/x.y-%d", i, g.r.IntN(9)) }, g.text),
		DistinctNodes: g.maybe(),
		MaxRunTime:    api.Duration(g.r.Int64N(int64(24 * time.Hour))),
	}
	if g.maybe() {
		j.Queue = g.name("q")
	}
	if g.maybe() {
		j.QoS = []api.QoS{api.QoSOnline, api.QoSOffline}[g.r.IntN(2)]
	}
	if g.maybe() {
		j.IdempotencyKey = g.name("key")
	}
	ops := []api.ConstraintOp{api.OpIn, api.OpNotIn, api.OpExists, api.OpNotExists}
	if g.maybe() {
		j.Constraints = []api.Constraint{}
	}
	for range g.r.IntN(3) {
		c := api.Constraint{Key: g.name("key"), Op: ops[g.r.IntN(len(ops))]}
		if c.Op == api.OpIn || c.Op == api.OpNotIn {
			c.Values = []string{g.text(), g.name("v")}
		} else if g.maybe() {
			c.Values = []string{}
		}
		j.Constraints = append(j.Constraints, c)
	}
	if g.maybe() {
		j.Retry.MaxAttempts = int32(g.r.IntN(api.MaxAttempts) + 1)
	}
	if g.maybe() {
		j.Retry.Backoff = api.Duration(g.r.Int64N(int64(time.Minute)))
		j.Retry.MaxBackoff = j.Retry.Backoff + api.Duration(g.r.Int64N(int64(time.Hour)))
	}
	if g.maybe() {
		j.Policy = &api.Policy{Filters: g.strs(func() string { return api.FilterNames[g.r.IntN(len(api.FilterNames))] })}
		j.Policy.Filters = uniq(j.Policy.Filters)
		for _, n := range api.ScorerNames[:g.r.IntN(len(api.ScorerNames)+1)] {
			j.Policy.Scorers = append(j.Policy.Scorers, api.ScorerRef{Name: n, Weight: int32(g.r.IntN(api.MaxScorerWeight + 1))})
		}
	}
	for i := range g.r.IntN(3) + 1 {
		tg := api.TaskGroupSpec{Count: g.r.Int64N(api.MaxTaskCount) + 1, PreferredNodes: g.strs(func() string { return g.name("node") })}
		if g.maybe() {
			tg.Name = fmt.Sprintf("group-%d", i)
		}
		for k := range g.r.IntN(3) + 1 {
			tg.Pod.Containers = append(tg.Pod.Containers, g.container(k))
		}
		tg.Pod.SharePID = g.maybe()
		g.storage(&tg.Pod)
		if g.maybe() {
			tg.Pod.Sim = &api.SimSpec{}
			if g.maybe() {
				*tg.Pod.Sim = api.SimSpec{RunTime: api.Duration(g.r.Int64N(int64(time.Hour))), ExitCode: int32(g.r.IntN(256))}
			}
			if g.maybe() {
				u := &api.SimUsage{CPU: g.r.Int64N(64_000), Memory: g.r.Int64N(1 << 40)}
				if g.maybe() {
					u.Peak = &api.SimPeak{CPU: g.r.Int64N(64_000), Memory: g.r.Int64N(1 << 40),
						Period: api.Duration(time.Minute), Length: api.Duration(g.r.Int64N(int64(time.Minute)-1) + 1)}
				}
				tg.Pod.Sim.Usage = u
			}
		}
		j.Tasks = append(j.Tasks, tg)
	}
	return j
}

// storage gives p, some of the time, a network mode, volumes, and its
// containers mounts of them.
func (g specGen) storage(p *api.PodSpec) {
	if g.maybe() {
		return
	}
	p.Network.Mode = []string{"", api.NetworkBridge, api.NetworkHost, api.NetworkNone}[g.r.IntN(4)]
	for i := range g.r.IntN(3) {
		v := api.Volume{Name: fmt.Sprintf("vol-%d", i)}
		if g.maybe() {
			v.Scratch = &api.ScratchVolume{Size: g.r.Int64N(api.MaxDisk) + 1}
		} else {
			v.HostPath = &api.HostPathVolume{Path: "/srv/" + g.name("data"), ReadOnly: g.maybe()}
		}
		p.Volumes = append(p.Volumes, v)
	}
	if len(p.Volumes) == 0 {
		return
	}
	for k := range p.Containers {
		for i := range g.r.IntN(3) {
			m := api.Mount{Volume: p.Volumes[g.r.IntN(len(p.Volumes))].Name, Path: fmt.Sprintf("/mnt/m%d", i), ReadOnly: g.maybe()}
			p.Containers[k].Mounts = append(p.Containers[k].Mounts, m)
		}
	}
}

// uniq drops repeats from vs, keeping nil nil and empty empty.
func uniq(vs []string) []string {
	out := vs[:0:0]
	for _, v := range vs {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func (g specGen) container(i int) api.ContainerSpec {
	c := api.ContainerSpec{
		Command: []string{"/bin/" + g.name("tool"), g.text()},
		Args:    g.strs(g.text),
		Env:     g.strMap(func(i int) string { return fmt.Sprintf("VAR_%d", i) }, g.text),
		Resources: api.Resources{
			CPU:    g.r.Int64N(api.MaxCPU) + 1,
			Memory: g.r.Int64N(api.MaxMemory) + 1,
			GPUs:   g.r.Int64N(api.MaxGPUs + 1),
			Disk:   g.r.Int64N(api.MaxDisk + 1),
		},
	}
	if g.maybe() {
		c.Name = fmt.Sprintf("ctr-%d", i)
	}
	switch g.r.IntN(3) {
	case 0:
		c.Image.Rootfs = "/images/" + g.name("root")
	case 1:
		c.Image.OCILayout = "/layouts/" + g.name("oci")
	default:
		c.Image.OCILayout, c.Image.Ref = "/layouts/"+g.name("oci"), g.name("tag")
	}
	if g.maybe() {
		c.WorkingDir = "/work/" + g.name("dir")
	}
	if g.maybe() {
		c.Resources.Ports = []api.Port{}
	}
	// A pod's ports have distinct names and static numbers.
	for k := range g.r.IntN(3) {
		p := api.Port{Name: fmt.Sprintf("c%dp%d", i, k), Protocol: []string{"", "tcp", "udp"}[g.r.IntN(3)]}
		if g.maybe() {
			p.Port = int32(1 + i*3 + k + 256*g.r.IntN(256))
		}
		c.Resources.Ports = append(c.Resources.Ports, p)
	}
	return c
}

// TestSpecCodecMatchesJSON checks, on random valid specs (defaulted or
// not), that the binary round trip with defaults gives exactly the spec the
// JSON path (json.Marshal, then api.DecodeJobs) gave the FSM before, and
// that a submit command stores it so (in memory and, after Load, from the
// record).
func TestSpecCodecMatchesJSON(t *testing.T) {
	g := specGen{seedtest.Rand(t)}
	for i := range 500 {
		s := g.job()
		if g.maybe() {
			s.SetDefaults()
		}
		want := viaJSON(t, &s)
		got, _ := specRoundTrip(t, &s)
		got.SetDefaults()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("spec %d: binary and JSON round trips differ:\n got %#v\nwant %#v", i, got, want)
		}

		f, st := New(), newMemStore()
		cmd, err := SubmitJobs(time.Unix(1, 0), []api.JobSpec{s})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.apply(f, 1, cmd); err != nil {
			t.Fatalf("spec %d: apply: %v", i, err)
		}
		if !reflect.DeepEqual(*f.mu.jobs.get(1).specOf(), want) {
			t.Fatalf("spec %d: applied spec differs:\n got %#v\nwant %#v", i, *f.mu.jobs.get(1).specOf(), want)
		}
		loaded := New()
		if err := loaded.Load(st); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*loaded.mu.jobs.get(1).specOf(), want) {
			t.Fatalf("spec %d: loaded spec differs:\n got %#v\nwant %#v", i, *loaded.mu.jobs.get(1).specOf(), want)
		}
	}
}

// TestSubmitRejectsAsJSONDid checks that a submit of random specs with
// random mistakes is rejected by SubmitJobs, before anything is proposed,
// with the same *api.ValidationError (problems by item index and path) that
// DecodeJobs gives for the same jobs in JSON. One mistake differs, and is checked alone: a negative
// duration, which api's JSON decoder reported itself, first among its
// item's problems and in its own words, and ValidateJobs reports at the
// same path, in field order.
func TestSubmitRejectsAsJSONDid(t *testing.T) {
	g := specGen{seedtest.Rand(t)}
	breaks := []func(*api.JobSpec){
		func(s *api.JobSpec) { s.Name = "" },
		func(s *api.JobSpec) { s.Name = "bad name" },
		func(s *api.JobSpec) { s.Priority = -1 },
		func(s *api.JobSpec) { s.QoS = "gold" },
		func(s *api.JobSpec) { s.Tasks[0].Count = 0 },
		func(s *api.JobSpec) { s.Tasks = []api.TaskGroupSpec{} },
		func(s *api.JobSpec) { s.Tasks = nil },
		func(s *api.JobSpec) { s.Tasks[0].Pod.Containers[0].Command = nil },
		func(s *api.JobSpec) { s.Tasks[0].Pod.Containers = nil },
		func(s *api.JobSpec) { s.Tasks[0].Pod.Containers[0].Resources.CPU = 0 },
		func(s *api.JobSpec) { s.Tasks[0].Pod.Containers[0].Command = []string{""} },
		func(s *api.JobSpec) { s.Tasks[0].Pod.Containers[0].Image = api.Image{} },
		func(s *api.JobSpec) { s.Tasks[0].Pod.Containers[0].Env = map[string]string{"1X": "y"} },
		func(s *api.JobSpec) { s.Retry.MaxAttempts = api.MaxAttempts + 1 },
		func(s *api.JobSpec) {
			s.Retry.Backoff, s.Retry.MaxBackoff = api.Duration(time.Hour), api.Duration(time.Second)
		},
		func(s *api.JobSpec) { s.Labels = map[string]string{"-x": "y"} },
		func(s *api.JobSpec) { s.Constraints = []api.Constraint{{Key: "k", Op: "near"}} },
		func(s *api.JobSpec) { s.Policy = &api.Policy{Filters: []string{"nope"}} },
		func(s *api.JobSpec) { s.IdempotencyKey = "has space" },
		func(s *api.JobSpec) {
			s.Tasks = append(s.Tasks, s.Tasks[0])
			s.Tasks[0].Name, s.Tasks[len(s.Tasks)-1].Name = "same", "same"
		},
	}
	for i := range 300 {
		specs := make([]api.JobSpec, 1+g.r.IntN(4))
		for k := range specs {
			specs[k] = g.job()
		}
		for range 1 + g.r.IntN(3) {
			// Every break may index the first container.
			if s := &specs[g.r.IntN(len(specs))]; len(s.Tasks) > 0 && len(s.Tasks[0].Pod.Containers) > 0 {
				breaks[g.r.IntN(len(breaks))](s)
			}
		}
		var ndjson [][]byte
		for k := range specs {
			js, err := json.Marshal(&specs[k])
			if err != nil {
				t.Fatal(err)
			}
			ndjson = append(ndjson, js)
		}
		_, wantErr := api.DecodeJobs(bytes.Join(ndjson, []byte{'\n'}))
		cmd, gotErr := SubmitJobs(time.Unix(1, 0), specs)
		if cmd != nil {
			t.Fatalf("case %d: a command of invalid specs", i)
		}
		var want, got *api.ValidationError
		if !errors.As(wantErr, &want) || !errors.As(gotErr, &got) {
			t.Fatalf("case %d: want validation errors, JSON path %v, binary %v", i, wantErr, gotErr)
		}
		if got.Error() != want.Error() {
			t.Fatalf("case %d: errors differ:\n got %v\nwant %v", i, got, want)
		}
	}
}

func TestSubmitRejectsNegativeDuration(t *testing.T) {
	specs := benchSpecs(2, false)
	specs[1].MaxRunTime = -1
	specs[1].Tasks[0].Pod.Sim = &api.SimSpec{RunTime: -1}
	_, err := SubmitJobs(time.Unix(1, 0), specs)
	var ve *api.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a validation error, got %v", err)
	}
	want := []api.Problem{
		{Item: 1, Path: "jobs[1].max_run_time", Message: "must not be negative"},
		{Item: 1, Path: "jobs[1].tasks[0].pod.sim.run_time", Message: "must not be negative"},
	}
	if !reflect.DeepEqual(ve.Problems, want) {
		t.Fatalf("problems %+v, want %+v", ve.Problems, want)
	}
}

// TestSpecCodecCorrupt checks that every truncation of a valid encoding and
// non-canonical bytes are errors wrapping ErrCorrupt.
func TestSpecCodecCorrupt(t *testing.T) {
	g := specGen{seedtest.Rand(t)}
	for range 50 {
		s := g.job()
		_, b := specRoundTrip(t, &s)
		for n := range len(b) {
			d := dec{b: b[:n]}
			decodeSpec(&d)
			if err := d.done("spec"); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%d of %d bytes: %v", n, len(b), err)
			}
		}
		d := dec{b: append(bytes.Clone(b), 0)}
		decodeSpec(&d)
		if err := d.done("spec"); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trailing byte: %v", err)
		}
	}
	one := api.JobSpec{Name: "j", Labels: map[string]string{"a": "1", "b": "2"}}
	_, b := specRoundTrip(t, &one)
	for name, edit := range map[string]func([]byte) []byte{
		"keys out of order": func(b []byte) []byte {
			return bytes.Replace(b, []byte("\x01a\x011\x01b\x012"), []byte("\x01b\x012\x01a\x011"), 1)
		},
		"duplicate key": func(b []byte) []byte { return bytes.Replace(b, []byte("\x01b\x012"), []byte("\x01a\x012"), 1) },
		"bool of 2":     func(b []byte) []byte { return bytes.Replace(b, []byte("\x012\x00\x00"), []byte("\x012\x00\x02"), 1) },
	} {
		bad := edit(bytes.Clone(b))
		if bytes.Equal(bad, b) {
			t.Fatalf("%s: edit did nothing to %q", name, b)
		}
		d := dec{b: bad}
		decodeSpec(&d)
		if err := d.done("spec"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestLoadRejectsUnknownJobRecord checks that Load refuses a job record or
// a submit record of another format (the JSON records of version 1, say),
// or one cut short or numbered outside the job sequence, instead of
// misreading it. Submit records come with their specs stored plain (a small
// submit) and compressed (a large one).
func TestLoadRejectsUnknownJobRecord(t *testing.T) {
	st := newMemStore()
	f := New()
	small, _ := SubmitJobs(time.Unix(1, 0), benchSpecs(3, true))
	large, _ := SubmitJobs(time.Unix(3, 0), benchSpecs(100, true))
	for i, cmd := range [][]byte{
		small,
		// A cancel writes the job's own record, which supersedes the
		// submit record's copy.
		CancelJob(time.Unix(2, 0), "j2"),
		large,
	} {
		if _, _, err := st.apply(f, uint64(i+1), cmd); err != nil {
			t.Fatal(err)
		}
	}
	loaded := New()
	if err := loaded.Load(st); err != nil {
		t.Fatal(err)
	}
	if a, b := f.dump(), loaded.dump(); a != b {
		t.Fatalf("loaded state differs:\nlive:\n%s\nloaded:\n%s", a, b)
	}
	jobRec := string(jobKey(2))
	plainRec, s2Rec := string(appendSubmitKey(nil, 1)), string(appendSubmitKey(nil, 4))
	if len(st.m[jobRec]) == 0 {
		t.Fatalf("want job 2's record; keys: %v", slices.Collect(maps.Keys(st.m)))
	}
	for key, want := range map[string]byte{plainRec: specsPlain, s2Rec: specsS2} {
		if rec := st.m[key]; rec[specsAt(rec)] != want {
			t.Fatalf("submit record %x: specs stored as %d, want %d", key, rec[specsAt(rec)], want)
		}
	}
	type badRecord struct {
		name, key string
		rec       func(good []byte) []byte
	}
	cases := []badRecord{
		{"job record version 1 (JSON)", jobRec, func([]byte) []byte { return append([]byte{1, 2, 0}, `{"name":"j","tasks":[]}`...) }},
		{"job record version 2", jobRec, func(good []byte) []byte { return append([]byte{2}, good[1:]...) }},
		{"job record version 7", jobRec, func(good []byte) []byte { return append([]byte{7}, good[1:]...) }},
		{"job record truncated", jobRec, func(good []byte) []byte { return good[:len(good)-1] }},
		{"job record of a newer spec layout", jobRec, func(good []byte) []byte {
			d := dec{b: good[1:]}
			d.varint()
			d.bool()
			bad := slices.Clone(good)
			bad[len(good)-len(d.b)] = specLayout + 1
			return bad
		}},
		{"submit record of no jobs", plainRec, func([]byte) []byte { return []byte{submitRecordVersion, 2, 0, specsPlain} }},
		{"submit record overlapping another", string(appendSubmitKey(nil, 2)), func([]byte) []byte { return st.m[plainRec] }},
		{"submit record past the sequence", string(appendSubmitKey(nil, 104)), func([]byte) []byte { return st.m[plainRec] }},
	}
	for _, sub := range []struct{ name, key string }{{"plain", plainRec}, {"compressed", s2Rec}} {
		for _, c := range []badRecord{
			{"version 1", sub.key, func(good []byte) []byte { return append([]byte{1}, good[1:]...) }},
			{"version 6", sub.key, func(good []byte) []byte { return append([]byte{6}, good[1:]...) }},
			{"of a newer spec layout", sub.key, func(good []byte) []byte {
				bad := slices.Clone(good)
				bad[layoutAt(good)] = specLayout + 1
				return bad
			}},
			{"truncated", sub.key, func(good []byte) []byte { return good[:len(good)-1] }},
			{"with a byte more", sub.key, func(good []byte) []byte { return append(slices.Clone(good), 0) }},
			{"claiming a job more than it holds", sub.key, func(good []byte) []byte {
				d := dec{b: good}
				d.byte()
				submitted := d.varint()
				d.byte()
				return encodeSubmit(nil, submitted, int(d.uvarint())+1, good[specsAt(good):])
			}},
			{"with its specs stored in an unknown way", sub.key, func(good []byte) []byte {
				bad := slices.Clone(good)
				bad[specsAt(good)] = 2
				return bad
			}},
		} {
			c.name = "submit record, " + sub.name + ", " + c.name
			cases = append(cases, c)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { st.loadRefuses(t, tc.key, tc.rec(st.m[tc.key])) })
	}
}

// layoutAt returns where a submit record's spec layout is.
func layoutAt(rec []byte) int {
	d := dec{b: rec}
	d.byte()
	d.varint()
	return len(rec) - len(d.b)
}

// specsAt returns where a submit record's block of specs starts.
func specsAt(rec []byte) int {
	d := dec{b: rec[layoutAt(rec)+1:]}
	d.uvarint()
	return len(rec) - len(d.b)
}

// encodings returns the encodings of n random specs of g.
func (g specGen) encodings(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		s := g.job()
		var e enc
		appendSpec(&e, &s)
		out[i] = e.b
	}
	return out
}

func FuzzDecodeSpec(f *testing.F) {
	for _, b := range (specGen{rand.New(rand.NewPCG(1, 2))}).encodings(8) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := dec{b: b}
		s := decodeSpec(&d)
		err := d.done("spec")
		sd := sharedDec(b)
		shared := newSpecDecoder(2).decode(&sd)
		if serr := sd.done("spec"); (serr == nil) != (err == nil) {
			t.Fatalf("decoders disagree: %v, %v", err, serr)
		}
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		if !reflect.DeepEqual(s, shared) {
			t.Fatalf("decoders disagree:\n%#v\n%#v", s, shared)
		}
		var e enc
		appendSpec(&e, &s)
		if !bytes.Equal(e.b, b) {
			t.Fatalf("accepted a non-canonical encoding:\n got %x\nwant %x", e.b, b)
		}
	})
}

// FuzzSkim checks that skimSpec (apply's reader) accepts exactly the
// specs the full decoder accepts, reads the same job fields, idempotency
// key and task groups, with each group's demand, and that what it accepted
// decodes later (job.specOf) to the full decoder's spec.
func FuzzSkim(f *testing.F) {
	for _, b := range (specGen{rand.New(rand.NewPCG(3, 4))}).encodings(8) {
		f.Add(b)
	}
	f.Fuzz(checkSkim)
}

// TestSkimAgreesOnMutations runs FuzzSkim's check on every encoding one
// byte off a valid one (each byte one more and one less) and on every
// truncation: the mistakes a fuzzer may take long to make, such as two
// environment keys out of order.
func TestSkimAgreesOnMutations(t *testing.T) {
	for _, valid := range (specGen{seedtest.Rand(t)}).encodings(10) {
		for i := range valid {
			for _, delta := range []byte{1, 255} {
				b := bytes.Clone(valid)
				b[i] += delta
				checkSkim(t, b)
			}
			checkSkim(t, valid[:i])
		}
	}
}

// checkSkim is FuzzSkim's check of one encoding.
func checkSkim(t *testing.T, b []byte) {
	t.Helper()
	d := sharedDec(b)
	full := decodeSpec(&d)
	err := d.done("spec")
	prior := []group{{name: "before"}}
	f, idem, groups, ok := skimSpec(string(b), prior)
	if ok != (err == nil) {
		t.Fatalf("readers disagree: decoder %v, skim ok %v", err, ok)
	}
	if !ok {
		if serr := specError(string(b)); !errors.Is(serr, ErrCorrupt) {
			t.Fatalf("specError = %v, want ErrCorrupt", serr)
		}
		return
	}
	if !reflect.DeepEqual(f, fieldsOf(&full)) || idem != full.IdempotencyKey {
		t.Fatalf("skim read fields %+v and key %q, want %+v and %q", f, idem, fieldsOf(&full), full.IdempotencyKey)
	}
	if len(groups) != 1+len(full.Tasks) || groups[0].name != "before" {
		t.Fatalf("skim appended %d groups to 1 for %d task groups", len(groups), len(full.Tasks))
	}
	for i, g := range groups[1:] {
		tg := &full.Tasks[i]
		if g.name != tg.Name || g.count != tg.Count || g.demand != tg.Pod.Demand() {
			t.Fatalf("group %d: %q, %d, %+v; want %q, %d, %+v", i, g.name, g.count, g.demand, tg.Name, tg.Count, tg.Pod.Demand())
		}
	}
	j := &job{specEnc: string(b)}
	if got := j.specOf(); !reflect.DeepEqual(*got, full) {
		t.Fatalf("the spec decoded on first use differs:\n got %#v\nwant %#v", *got, full)
	}
}

// TestSpecDecoderSharesEqualMaps checks that specs whose labels or
// environment encode alike share one map, and that the others get their
// own, right, map.
func TestSpecDecoderSharesEqualMaps(t *testing.T) {
	specs := benchSpecs(4, true)
	specs[2].Tasks[0].Pod.Containers[0].Env = map[string]string{"A": "c", "B": "d"}
	for i := range specs {
		specs[i].Labels = map[string]string{"team": "x"}
	}
	specs[3].Labels = map[string]string{"team": "y"}
	var e enc
	for i := range specs {
		var s enc
		appendSpec(&s, &specs[i])
		e.bytes(s.b)
	}
	sd, d := newSpecDecoder(len(specs)), sharedDec(e.b)
	got := make([]api.JobSpec, len(specs))
	for i := range got {
		sub := d.sub()
		got[i] = sd.decode(&sub)
		if err := sub.done("spec"); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[i], specs[i]) {
			t.Fatalf("spec %d decodes as %+v, want %+v", i, got[i], specs[i])
		}
	}
	same := func(a, b map[string]string) bool {
		return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
	}
	env := func(i int) map[string]string { return got[i].Tasks[0].Pod.Containers[0].Env }
	switch {
	case !same(env(0), env(1)):
		t.Error("equal environments of specs 0 and 1 are two maps")
	case same(env(1), env(2)) || same(env(2), env(3)):
		t.Error("spec 2's environment is shared with a different one")
	case !same(got[0].Labels, got[2].Labels):
		t.Error("equal labels of specs 0 and 2 are two maps")
	case same(got[2].Labels, got[3].Labels):
		t.Error("spec 3's labels are shared with different ones")
	}
}

// TestSkimVarints checks the skim's varint readers against encoding/binary
// on every length of encoding, truncations and overflows included.
func TestSkimVarints(t *testing.T) {
	r := seedtest.Rand(t)
	var cases [][]byte
	for _, v := range []uint64{0, 1, 63, 64, 127, 128, 1 << 20, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		cases = append(cases, binary.AppendUvarint(nil, v))
	}
	for range 2000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
			if r.IntN(3) > 0 {
				b[i] |= 0x80
			}
		}
		cases = append(cases, b)
	}
	cases = append(cases, bytes.Repeat([]byte{0xff}, 9), append(bytes.Repeat([]byte{0xff}, 9), 1), append(bytes.Repeat([]byte{0xff}, 9), 2))
	for _, b := range cases {
		for cut := range len(b) + 1 {
			in := b[:cut]
			wu, wn := binary.Uvarint(in)
			u, i := readUvarint(string(in), 0)
			if (wn > 0) != (i > 0) || wn > 0 && (u != wu || i != wn) {
				t.Fatalf("readUvarint(%x) = %d, %d; binary.Uvarint gives %d, %d", in, u, i, wu, wn)
			}
			wv, wn := binary.Varint(in)
			v, i := readVarint(string(in), 0)
			if (wn > 0) != (i > 0) || wn > 0 && (v != wv || i != wn) {
				t.Fatalf("readVarint(%x) = %d, %d; binary.Varint gives %d, %d", in, v, i, wv, wn)
			}
			// The same after other bytes, at an offset.
			pre := string(b[:r.IntN(len(b)+1)])
			u, i = readUvarint(pre+string(in), len(pre))
			if wu, wn := binary.Uvarint(in); (wn > 0) != (i > 0) || wn > 0 && (u != wu || i != len(pre)+wn) {
				t.Fatalf("readUvarint(%x) after %x = %d, %d; binary.Uvarint gives %d, %d", in, pre, u, i, wu, wn)
			}
		}
	}
}

// TestSubmitCommandBlocks checks that a submit command's specs apply alike
// stored plain (a small submit) and compressed (a large one), and that
// apply refuses a command whose block of specs is damaged and changes
// nothing.
func TestSubmitCommandBlocks(t *testing.T) {
	for _, tc := range []struct {
		jobs int
		kind byte
	}{{3, specsPlain}, {100, specsS2}} {
		specs := benchSpecs(tc.jobs, false)
		for i := range specs {
			specs[i].Name = fmt.Sprintf("job-%d", i)
			specs[i].Tasks[0].Count = int64(i + 1)
		}
		cmd, err := SubmitJobs(time.Unix(1, 0), specs) // defaults the specs
		if err != nil {
			t.Fatal(err)
		}
		d := dec{b: cmd[2:]}
		d.varint()
		layoutAt := len(cmd) - len(d.b)
		d.byte()
		n := d.uvarint()
		at := len(cmd) - len(d.b) // the block of specs
		if cmd[at] != tc.kind {
			t.Fatalf("%d jobs: specs stored as %d, want %d", tc.jobs, cmd[at], tc.kind)
		}
		f, st := New(), newMemStore()
		if _, _, err := st.apply(f, 1, cmd); err != nil {
			t.Fatalf("%d jobs: %v", tc.jobs, err)
		}
		for i := range specs {
			if got := f.mu.jobs.get(uint64(i + 1)).specOf(); !reflect.DeepEqual(*got, specs[i]) {
				t.Fatalf("%d jobs: job %d's spec is %+v, want %+v", tc.jobs, i+1, *got, specs[i])
			}
		}
		head := cmd[:at-len(binary.AppendUvarint(nil, n))]
		for name, bad := range map[string][]byte{
			"truncated":                  cmd[:len(cmd)-1],
			"with a byte more":           append(slices.Clone(cmd), 0),
			"without its block":          cmd[:at],
			"claiming a job more":        append(binary.AppendUvarint(slices.Clone(head), n+1), cmd[at:]...),
			"with specs stored unknown":  append(slices.Clone(cmd[:at]), append([]byte{2}, cmd[at+1:]...)...),
			"with its block cut in half": cmd[:at+(len(cmd)-at)/2],
			"of a newer spec layout":     append(append(slices.Clone(cmd[:layoutAt]), specLayout+1), cmd[layoutAt+1:]...),
		} {
			f, st := New(), newMemStore()
			before := f.dump()
			if _, _, err := st.apply(f, 1, bad); !errors.Is(err, ErrCorrupt) {
				t.Errorf("%d jobs, a command %s: %v, want ErrCorrupt", tc.jobs, name, err)
			}
			if after := f.dump(); after != before || len(st.m) != 0 {
				t.Errorf("%d jobs, a command %s: the state changed:\n%s", tc.jobs, name, after)
			}
		}
	}
}
