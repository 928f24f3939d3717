package charts_test

import (
	"bytes"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/sluicehq/sluice/bench/charts"
	"github.com/sluicehq/sluice/bench/e2ebench"
	"github.com/sluicehq/sluice/bench/storebench"
	"github.com/sluicehq/sluice/bench/suite"
	"github.com/sluicehq/sluice/bench/suite/suitetest"
)

// decodePNG fails t unless b is a PNG of a plausible size.
func decodePNG(t *testing.T, name string, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: not a PNG: %v", name, err)
	}
	if r := img.Bounds(); r.Dx() < 200 || r.Dy() < 100 {
		t.Errorf("%s: %v, want a plot-sized image", name, r)
	}
}

func TestPlots(t *testing.T) {
	for _, tc := range []struct {
		name string
		plot func(io.Writer) error
	}{
		{"e2e-throughput", func(w io.Writer) error { return charts.E2EThroughput(w, suitetest.E2E) }},
		{"e2e-latency", func(w io.Writer) error { return charts.E2ELatency(w, suitetest.E2E) }},
		{"raftkv", func(w io.Writer) error { return charts.Raftkv(w, suitetest.Raftkv) }},
		{"submit", func(w io.Writer) error { return charts.Submit(w, suitetest.Submit) }},
		{"soak", func(w io.Writer) error { return charts.Soak(w, suitetest.Soak) }},
		{"overcommit", func(w io.Writer) error { return charts.Overcommit(w, suitetest.Overcommit) }},
		{"overcommit-fleet", func(w io.Writer) error { return charts.OvercommitFleet(w, suitetest.OvercommitFleet) }},
		{"chaos", func(w io.Writer) error { return charts.Chaos(w, suitetest.Chaos) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a, b bytes.Buffer
			if err := tc.plot(&a); err != nil {
				t.Fatal(err)
			}
			decodePNG(t, tc.name, a.Bytes())
			if err := tc.plot(&b); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a.Bytes(), b.Bytes()) {
				t.Error("two plots of the same result differ")
			}
		})
	}
}

func TestPlotSoakWithoutRows(t *testing.T) {
	if err := charts.Soak(io.Discard, e2ebench.SoakResult{}); err == nil {
		t.Fatal("a soak plot without rows: want an error")
	}
}

func TestPlotRaftkvWithoutEtcd(t *testing.T) {
	err := charts.Raftkv(io.Discard, []storebench.Comparison{{Writers: 1, ValueBytes: 256}})
	if err == nil {
		t.Fatal("a raftkv plot without the etcd anchor: want an error")
	}
}

func TestDraw(t *testing.T) {
	dir := t.TempDir()
	s := suitetest.Suite()
	drawn, err := charts.Draw(s, dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, c := range drawn {
		files = append(files, c.File)
		b, err := os.ReadFile(filepath.Join(dir, c.File))
		if err != nil {
			t.Fatal(err)
		}
		decodePNG(t, c.File, b)
	}
	want := []string{"e2e-throughput.png", "e2e-latency.png", "soak.png", "raftkv.png", "submit.png", "overcommit.png", "overcommit-fleet.png", "chaos.png"}
	if !slices.Equal(files, want) {
		t.Errorf("charts %v, want %v", files, want)
	}

	// Without etcd there is no raftkv chart; without e2e steps no e2e
	// ones; without soak rows no soak one; without a time series no
	// overcommit ones.
	s.Raftkv.Result = []storebench.Comparison{{Writers: 1, ValueBytes: 256}}
	s.E2E.Result.Steps = nil
	s.Soak.Result.Rows = nil
	s.Overcommit.Result.Series = nil
	s.OvercommitFleet.Result.Series = nil
	s.Chaos.Result.Sched = nil
	files = files[:0]
	for _, c := range suite.Charts(s) {
		files = append(files, c.File)
	}
	if !slices.Equal(files, []string{"submit.png"}) {
		t.Errorf("charts %v, want only submit.png", files)
	}
}
