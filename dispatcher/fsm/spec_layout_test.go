package fsm

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/api"
)

var updateLayouts = flag.Bool("update-spec-layouts", false,
	"write the corpus of the current spec layout, testdata/spec-layout-N.txt, when it has none")

// layoutCorpus is the path of the corpus of specs of layout n.
func layoutCorpus(n int) string { return fmt.Sprintf("testdata/spec-layout-%d.txt", n) }

// A corpusSpec is one spec of a layout's corpus: its encoding in that
// layout, and the spec as encoding/json wrote it.
type corpusSpec struct {
	enc  []byte
	json string
}

// loadCorpus reads the corpus of layout n: lines of the encoding in hex, a
// tab, and the JSON; lines starting with # are comments.
func loadCorpus(n int) ([]corpusSpec, error) {
	b, err := os.ReadFile(layoutCorpus(n))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no corpus of spec layout %d: write it with go test ./dispatcher/fsm -run TestSpecLayouts -update-spec-layouts", n)
	}
	if err != nil {
		return nil, err
	}
	var out []corpusSpec
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		h, js, ok := strings.Cut(sc.Text(), "\t")
		e, err := hex.DecodeString(h)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s:%d: want hex, a tab, JSON", layoutCorpus(n), line)
		}
		out = append(out, corpusSpec{enc: e, json: js})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no spec", layoutCorpus(n))
	}
	return out, nil
}

func readCorpus(t *testing.T, n int) []corpusSpec {
	t.Helper()
	cs, err := loadCorpus(n)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// writeCorpus writes the corpus of the current layout, specs that set
// every field (fillRandom) and random valid ones with their defaults
// (specGen, as SubmitJobs writes them), unless there
// is one: a layout's corpus is what the codec of its time wrote, never
// rewritten.
func writeCorpus(t *testing.T) {
	path := layoutCorpus(specLayout)
	if _, err := os.Stat(path); err == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Specs in spec layout %d, as the codec of their time encoded them: the\n# encoding in hex, a tab, then the spec as encoding/json writes it.\n", specLayout)
	add := func(s *api.JobSpec) {
		var e enc
		appendSpec(&e, s)
		js, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(hex.EncodeToString(e.b) + "\t" + string(js) + "\n")
	}
	r := rand.New(rand.NewPCG(1, specLayout))
	for range 4 {
		var s api.JobSpec
		fillRandom(t, r, reflect.ValueOf(&s).Elem(), "JobSpec")
		add(&s)
	}
	g := specGen{rand.New(rand.NewPCG(2, specLayout))}
	for range 20 {
		s := g.job()
		s.SetDefaults()
		add(&s)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// normJSON is v, a value of encoding/json, without the members whose
// values are zero (null, false, 0, "", empty arrays and objects), at any
// depth: a field that a layout does not hold decodes zero.
func normJSON(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if x = normJSON(x); !zeroJSON(x) {
				out[k] = x
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normJSON(x)
		}
		return out
	}
	return v
}

func zeroJSON(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		return !v
	case float64:
		return v == 0
	case string:
		return v == ""
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// sameSpec fails unless s is, as JSON and but for zero members, want.
func sameSpec(t *testing.T, what string, s *api.JobSpec, want string) {
	t.Helper()
	got, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normJSON(a), normJSON(b)) {
		t.Fatalf("%s decodes to\n%s\nwant\n%s\n(was a field added without codec:\"since=%d\"?)", what, got, want, specLayout+1)
	}
}

// decodeLayout decodes b, a spec of layout l.
func decodeLayout(b []byte, l byte) (api.JobSpec, error) {
	sd := specDecoder{layout: l}
	d := dec{b: b}
	var s api.JobSpec
	sd.decodeInto(&d, &s)
	return s, d.done("spec")
}

// TestSpecLayouts decodes the corpus of every layout up to the current
// one, each in its layout, to the specs it was written from; encodes each
// in the current layout, which the skim reads alike; and checks that the
// current layout's corpus still encodes byte for byte as it was written.
// A field added to api without since= fails it, and so does a new layout
// without a corpus.
func TestSpecLayouts(t *testing.T) {
	if *updateLayouts {
		writeCorpus(t)
	}
	if _, err := os.Stat(layoutCorpus(specLayout + 1)); err == nil {
		t.Fatalf("%s exists, but the current layout is %d", layoutCorpus(specLayout+1), specLayout)
	}
	for l := 0; l <= specLayout; l++ {
		for i, c := range readCorpus(t, l) {
			what := fmt.Sprintf("%s, spec %d", layoutCorpus(l), i)
			s, err := decodeLayout(c.enc, byte(l))
			if err != nil {
				t.Fatalf("%s: %v (was a field added without codec:\"since=%d\"?)", what, err, specLayout+1)
			}
			sameSpec(t, what, &s, c.json)
			var e enc
			appendSpec(&e, &s)
			if l == specLayout && !bytes.Equal(e.b, c.enc) {
				t.Fatalf("%s encodes as\n%x\nnot as written\n%x", what, e.b, c.enc)
			}
			checkSkim(t, e.b)
			again, err := decodeLayout(e.b, specLayout)
			if err != nil || !reflect.DeepEqual(again, s) {
				t.Fatalf("%s: in the current layout it decodes to %+v (%v), want %+v", what, again, err, s)
			}
		}
	}
}

// legacySubmit is a submit command of version 9, the last whose specs are
// of layout 0, holding specs.
func legacySubmit(now int64, specs ...[]byte) []byte {
	e := enc{}
	e.byte(cmdSubmit)
	e.byte(9)
	e.varint(now)
	e.uvarint(uint64(len(specs)))
	var all enc
	for _, s := range specs {
		all.bytes(s)
	}
	e.b = appendSpecBlock(e.b, all.b)
	return e.b
}

// validLegacy returns the specs of the layout-0 corpus that api accepts,
// with their defaults, as SubmitJobs wrote them (those of every field set
// are not valid).
func validLegacy(t *testing.T) []corpusSpec {
	t.Helper()
	var out []corpusSpec
	for _, c := range readCorpus(t, 0) {
		s, err := decodeLayout(c.enc, 0)
		if err != nil {
			t.Fatal(err)
		}
		ss := []api.JobSpec{s}
		ss[0].SetDefaults()
		if api.ValidateJobs(ss) == nil && reflect.DeepEqual(ss[0], s) && s.IdempotencyKey == "" {
			out = append(out, c)
		}
	}
	if len(out) < 10 {
		t.Fatalf("%d valid specs in the layout-0 corpus, want 10 or more", len(out))
	}
	return out
}

// TestSubmitOfLayout0 applies a submit command of version 9, whose specs
// are of layout 0, small and large (compressed): its jobs hold the specs
// it was written from, the submit record holds them in the current layout,
// and the records of the versions before (a submit record of version 4, a
// job record of version 5, both of layout 0) load to the same state.
func TestSubmitOfLayout0(t *testing.T) {
	corpus := validLegacy(t)
	for _, n := range []int{3, len(corpus)} {
		specs := make([][]byte, n)
		for i := range specs {
			specs[i] = corpus[i].enc
		}
		q := newSeq(t)
		q.apply(legacySubmit(time.Unix(1, 0).UnixNano(), specs...))
		for i := range n {
			sameSpec(t, fmt.Sprintf("job %d of %d", i+1, n), q.f.mu.jobs.get(uint64(i+1)).specOf(), corpus[i].json)
		}
		rec := q.s.m[string(appendSubmitKey(nil, 1))]
		if rec[0] != submitRecordVersion || rec[layoutAt(rec)] != specLayout {
			t.Fatalf("%d jobs: submit record of version %d, layout %d; want %d, %d", n, rec[0], rec[layoutAt(rec)], submitRecordVersion, specLayout)
		}
		loaded := New()
		if err := loaded.Load(q.s); err != nil {
			t.Fatal(err)
		}
		if a, b := q.f.dump(), loaded.dump(); a != b {
			t.Fatalf("%d jobs: loaded state differs:\nlive:\n%s\nloaded:\n%s", n, a, b)
		}
		// The records the releases before wrote.
		var old enc
		old.byte(4)
		old.varint(time.Unix(1, 0).UnixNano())
		old.uvarint(uint64(n))
		var all enc
		for _, s := range specs {
			all.bytes(s)
		}
		old.b = appendSpecBlock(old.b, all.b)
		q.s.m[string(appendSubmitKey(nil, 1))] = old.b
		var job enc
		job.byte(5)
		job.varint(time.Unix(1, 0).UnixNano())
		job.bool(false)
		job.bytes(specs[1])
		q.s.m[string(jobKey(2))] = job.b
		older := New()
		if err := older.Load(q.s); err != nil {
			t.Fatalf("%d jobs: Load of records of layout 0: %v", n, err)
		}
		if a, b := q.f.dump(), older.dump(); a != b {
			t.Fatalf("%d jobs: state loaded from records of layout 0 differs:\nlive:\n%s\nloaded:\n%s", n, a, b)
		}
		sameSpec(t, "job 2 from its record of version 5", older.mu.jobs.get(2).specOf(), corpus[1].json)
	}
}

// legacyPodPrefix is the layout-0 encoding of a spec named j of one group
// g, count 1, whose pod is one container c running /x with 1000 millicores
// and 1 GiB, without mounts: up to the pod's flags byte.
const legacyPodPrefix = "016a0000000000000000000000000000010167020001016300000001022f78000000d00f8080808008000000"

// legacyContainer is the container of legacyPodPrefix.
var legacyContainer = api.ContainerSpec{Name: "c", Command: []string{"/x"}, Resources: api.Resources{CPU: 1000, Memory: 1 << 30}}

// legacyPod returns legacyPodPrefix, then tail: the pod's flags byte and
// what follows.
func legacyPod(t *testing.T, tail []byte) []byte {
	t.Helper()
	b, err := hex.DecodeString(legacyPodPrefix)
	if err != nil {
		t.Fatal(err)
	}
	return append(b, tail...)
}

// checkLegacyRefused checks that b, a layout-0 spec, is corrupt to the
// decoder and to apply, in a command of version 9 that changes nothing.
func checkLegacyRefused(t *testing.T, what string, b []byte) {
	t.Helper()
	if _, err := decodeLayout(b, 0); !errors.Is(err, ErrCorrupt) {
		t.Errorf("%s: decoder: %v, want ErrCorrupt", what, err)
	}
	f, st := New(), newMemStore()
	before := f.dump()
	if _, _, err := st.apply(f, 1, legacySubmit(1, b)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("%s: apply: %v, want ErrCorrupt", what, err)
	}
	if after := f.dump(); after != before || len(st.m) != 0 {
		t.Errorf("%s: the state changed:\n%s", what, after)
	}
}

// TestSpecLegacyPodFlags checks layout 0's pod flags byte: SharePID's bool
// of the releases before pods had storage, storage (network mode,
// volumes, mounts) behind its bit, and what the releases before never
// wrote (empty storage, unknown bits) refused.
func TestSpecLegacyPodFlags(t *testing.T) {
	s, err := decodeLayout(legacyPod(t, []byte{0, 0}), 0)
	want := api.JobSpec{Name: "j", Tasks: []api.TaskGroupSpec{{Name: "g", Count: 1, Pod: api.PodSpec{Containers: []api.ContainerSpec{legacyContainer}}}}}
	if err != nil || !reflect.DeepEqual(s, want) {
		t.Fatalf("the plain layout-0 pod decodes to %+v (%v), want %+v", s, err, want)
	}
	s, err = decodeLayout(legacyPod(t, []byte{podSharePID, 0}), 0)
	if err != nil || !s.Tasks[0].Pod.SharePID || s.Tasks[0].Pod.Sim != nil {
		t.Fatalf("SharePID's bool decodes to %+v, %v", s.Tasks[0].Pod, err)
	}
	var e enc
	e.byte(podStorage)
	e.str(api.NetworkHost)
	e.uvarint(2)
	e.str("scratch")
	e.byte(volumeScratch)
	e.varint(5 << 30)
	e.str("data")
	e.byte(volumeHostPath)
	appendHostPathVolume(&e, &api.HostPathVolume{Path: "/srv", ReadOnly: true})
	e.uvarint(1)
	appendMount(&e, &api.Mount{Volume: "data", Path: "/mnt", ReadOnly: true})
	e.byte(0)
	s, err = decodeLayout(legacyPod(t, e.b), 0)
	mounted := legacyContainer
	mounted.Mounts = []api.Mount{{Volume: "data", Path: "/mnt", ReadOnly: true}}
	wantPod := api.PodSpec{
		Containers: []api.ContainerSpec{mounted},
		Network:    api.NetworkSpec{Mode: api.NetworkHost},
		Volumes: []api.Volume{{Name: "scratch", Scratch: &api.ScratchVolume{Size: 5 << 30}},
			{Name: "data", HostPath: &api.HostPathVolume{Path: "/srv", ReadOnly: true}}},
	}
	if err != nil || !reflect.DeepEqual(s.Tasks[0].Pod, wantPod) {
		t.Fatalf("storage decodes to %+v (%v), want %+v", s.Tasks[0].Pod, err, wantPod)
	}
	q := newSeq(t)
	q.apply(legacySubmit(1, legacyPod(t, e.b)))
	if got := q.f.mu.jobs.get(1).groups[0].demand.Disk; got != 5<<30 {
		t.Fatalf("the pod's disk demand after apply is %d, want its scratch volume's %d", got, 5<<30)
	}
	for name, tail := range map[string][]byte{
		"empty storage": {podSharePID | podStorage, 0, 0, 0, 0},
		"unknown flag":  {1 << 2, 0},
		"unknown kind":  {podStorage, 0, 1, 1, 'v', 1 << 2, 0, 0},
	} {
		checkLegacyRefused(t, name, legacyPod(t, tail))
	}
}

// TestSpecLegacySimFlags checks layout 0's sim byte: the bool of the
// releases before pods had usage, usage and a peak behind their bits, and
// what the releases before never wrote refused.
func TestSpecLegacySimFlags(t *testing.T) {
	for _, tc := range []struct {
		tail []byte
		want *api.SimSpec
	}{
		{[]byte{0, simSet, 10, 6}, &api.SimSpec{RunTime: 5, ExitCode: 3}},
		{[]byte{0, simSet | simUsage, 10, 6, 2, 4}, &api.SimSpec{RunTime: 5, ExitCode: 3, Usage: &api.SimUsage{CPU: 1, Memory: 2}}},
		{[]byte{0, simSet | simUsage | simPeak, 10, 6, 2, 4, 6, 8, 10, 12}, &api.SimSpec{RunTime: 5, ExitCode: 3,
			Usage: &api.SimUsage{CPU: 1, Memory: 2, Peak: &api.SimPeak{CPU: 3, Memory: 4, Period: 5, Length: 6}}}},
	} {
		s, err := decodeLayout(legacyPod(t, tc.tail), 0)
		if err != nil || !reflect.DeepEqual(s.Tasks[0].Pod.Sim, tc.want) {
			t.Fatalf("sim %x decodes to %+v (%v), want %+v", tc.tail, s.Tasks[0].Pod.Sim, err, tc.want)
		}
	}
	for name, tail := range map[string][]byte{
		"peak without usage":   {0, simSet | simPeak, 10, 6, 2, 2, 2, 2},
		"usage without sim":    {0, simUsage, 2, 2},
		"unknown flag":         {0, simSet | 1<<3, 10, 6},
		"usage cut short":      {0, simSet | simUsage, 10, 6, 2},
		"peak cut short":       {0, simSet | simUsage | simPeak, 10, 6, 2, 2, 2, 2, 2},
		"exit code past int32": {0, simSet, 10, 0xfe, 0xff, 0xff, 0xff, 0x1f},
	} {
		checkLegacyRefused(t, name, legacyPod(t, tail))
	}
}

// FuzzDecodeLegacySpec checks that the layout-0 decoder never panics,
// refuses with ErrCorrupt, and that what it accepts encodes in the current
// layout to a spec that decodes the same.
func FuzzDecodeLegacySpec(f *testing.F) {
	cs, err := loadCorpus(0)
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range cs[:8] {
		f.Add(c.enc)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeLayout(b, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		var e enc
		appendSpec(&e, &s)
		again, err := decodeLayout(e.b, specLayout)
		if err != nil || !reflect.DeepEqual(again, s) {
			t.Fatalf("converted spec decodes to %+v (%v), want %+v", again, err, s)
		}
	})
}
