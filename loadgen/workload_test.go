package loadgen_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/loadgen"
)

const goodFile = `{"seed": 7, "arrival": {"process": "poisson", "rate": 200},
 "duration": "30s", "array_size": "zipf:1.5,1000",
 "shapes": [{"cpu": "500m", "memory": "512Mi", "weight": 3},
            {"cpu": 2, "memory": "4Gi"}],
 "run_time": "uniform:100ms,2s", "online_fraction": 0.2,
 "queues": [{"name": "batch", "weight": 4}, {"name": "adhoc"}],
 "priorities": [{"priority": 0, "weight": 9}, {"priority": 100}]}`

func TestDecodeWorkload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.json")
	if err := os.WriteFile(path, []byte(goodFile), 0o644); err != nil {
		t.Fatal(err)
	}
	w, err := loadgen.ReadWorkload(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	if w.Seed != 7 || w.Arrival.Rate != 200 || w.Duration.Std() != 30*time.Second ||
		w.ArraySize.String() != "zipf:1.5,1000" || len(w.Shapes) != 2 || w.Shapes[1].CPU != 2000 ||
		w.Shapes[0].Memory != 512<<20 || w.RunTime.Max != 2*time.Second || w.Queues[0].Weight != 4 ||
		w.Priorities[1].Priority != 100 {
		t.Errorf("decoded %+v", w)
	}
}

func TestDecodeWorkloadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"unknown field", `{"arrival": {"rat": 3}, "jobs": 1}`, []string{"arrival.rat: unknown field (known: burst, period, process, rate)"}},
		{"unknown top field", `{"jobz": 1}`, []string{"jobz: unknown field"}},
		{"unknown in a shape", `{"shapes": [{"cpu": 1, "memory": 1}, {"cpu": 1, "mem": 1}]}`, []string{"shapes[1]: mem: unknown field", "memory: missing"}},
		{"duplicate", `{"jobs": 1, "jobs": 2}`, []string{"jobs: duplicate field"}},
		{"wrong type", `{"jobs": "many", "arrival": {"rate": "fast"}}`, []string{"jobs: want an integer, got a JSON string", "arrival.rate: want a number"}},
		{"bad distribution", `{"array_size": "gauss:1,2", "run_time": "forever"}`, []string{"array_size: distribution \"gauss:1,2\": unknown kind", "run_time: duration distribution \"forever\""}},
		{"not an object", `[1]`, []string{"(document): want an object, got an array"}},
		{"queues not an array", `{"queues": {"name": "a"}}`, []string{"queues: want an array, got an object"}},
		{"trailing data", `{"jobs": 1} {}`, []string{"trailing data"}},
		{"not JSON", `{"jobs": `, []string{"not a JSON document"}},
		{"bad duration", `{"duration": 30}`, []string{"duration: duration: want a string"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadgen.DecodeWorkload([]byte(tc.in))
			if err == nil || !errors.Is(err, loadgen.ErrWorkloadFile) {
				t.Fatalf("error %v, want one wrapping ErrWorkloadFile", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestValidateReportsEverything(t *testing.T) {
	w := loadgen.Workload{
		Arrival:        loadgen.Arrival{Process: "bursts", Rate: 4},
		ArraySize:      loadgen.IntDist{Kind: loadgen.KindUniform, Min: 5, Max: 2},
		Shapes:         []loadgen.Shape{{CPU: 0, Memory: 1, Weight: -1}},
		RunTime:        loadgen.DurationDist{Kind: loadgen.KindFixed, Min: -time.Second, Max: -time.Second},
		OnlineFraction: 1.5,
		Queues:         []loadgen.Queue{{Name: ""}},
		Priorities:     []loadgen.Priority{{Priority: 5000}},
		Rootfs:         "relative",
	}
	err := w.Validate()
	var ve *loadgen.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate: %v, want a *ValidationError", err)
	}
	for _, want := range []string{"arrival.burst", "arrival.period", "arrival.rate", "duration, jobs", "array_size",
		"shapes[0].cpu", "shapes[0].weight", "run_time", "online_fraction", "queues[0].name", "priorities[0].priority", "rootfs"} {
		found := false
		for _, p := range ve.Problems {
			if strings.HasPrefix(p, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem about %s in:\n%s", want, strings.Join(ve.Problems, "\n"))
		}
	}
	bad := loadgen.Workload{Jobs: 1, Arrival: loadgen.Arrival{Rate: 1}, Pool: "bad pool!"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "pool") {
		t.Errorf("a pool the api refuses: %v", err)
	}
	zipf := loadgen.Workload{Jobs: 1, Arrival: loadgen.Arrival{Rate: 1}, ArraySize: loadgen.IntDist{Kind: loadgen.KindZipf, Min: 1, Max: 10, S: 1}}
	if err := zipf.Validate(); err == nil || !strings.Contains(err.Error(), "exponent") {
		t.Errorf("zipf with s = 1: %v", err)
	}
}

func TestParseTextForms(t *testing.T) {
	for in, want := range map[string]string{
		"7": "fixed:7", "fixed:3": "fixed:3", "uniform:1,100": "uniform:1,100", "zipf:1.2,500": "zipf:1.2,500",
	} {
		d, err := loadgen.ParseIntDist(in)
		if err != nil || d.String() != want {
			t.Errorf("ParseIntDist(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, in := range []string{"", "uniform:1", "zipf:x,3", "fixed:1,2", "pareto:1"} {
		if _, err := loadgen.ParseIntDist(in); err == nil {
			t.Errorf("ParseIntDist(%q) succeeded", in)
		}
	}
	if d, err := loadgen.ParseDurationDist("uniform:10ms,1s"); err != nil || d.Min != 10*time.Millisecond || d.Max != time.Second {
		t.Errorf("ParseDurationDist: %v, %v", d, err)
	}
	if s, err := loadgen.ParseShape("500m/1Gi=2.5"); err != nil || s.CPU != 500 || s.Memory != 1<<30 || s.Weight != 2.5 {
		t.Errorf("ParseShape: %+v, %v", s, err)
	}
	for _, in := range []string{"500m", "x/1Gi", "1/1Gi=w"} {
		if _, err := loadgen.ParseShape(in); err == nil {
			t.Errorf("ParseShape(%q) succeeded", in)
		}
	}
	if q, err := loadgen.ParseQueue("a=3"); err != nil || q.Name != "a" || q.Weight != 3 {
		t.Errorf("ParseQueue: %+v, %v", q, err)
	}
	if p, err := loadgen.ParsePriority("10=2"); err != nil || p.Priority != 10 || p.Weight != 2 {
		t.Errorf("ParsePriority: %+v, %v", p, err)
	}
}
