package charts

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/sluicehq/sluice/bench/chaosbench"
	"github.com/sluicehq/sluice/bench/e2ebench"
	"github.com/sluicehq/sluice/bench/overcommitbench"
	"github.com/sluicehq/sluice/bench/storebench"
	"github.com/sluicehq/sluice/bench/submitbench"
	"github.com/sluicehq/sluice/bench/suite"
)

// Draw draws every chart of s (suite.Charts) into dir and returns them.
func Draw(s suite.Suite, dir string) ([]suite.Chart, error) {
	charts := suite.Charts(s)
	for _, c := range charts {
		var draw func(io.Writer) error
		switch c.File {
		case suite.ChartE2EThroughput:
			draw = func(w io.Writer) error { return E2EThroughput(w, s.E2E.Result) }
		case suite.ChartE2ELatency:
			draw = func(w io.Writer) error { return E2ELatency(w, s.E2E.Result) }
		case suite.ChartSoak:
			draw = func(w io.Writer) error { return Soak(w, s.Soak.Result) }
		case suite.ChartRaftkv:
			draw = func(w io.Writer) error { return Raftkv(w, s.Raftkv.Result) }
		case suite.ChartSubmit:
			draw = func(w io.Writer) error { return Submit(w, s.Submit.Result) }
		case suite.ChartOvercommit:
			draw = func(w io.Writer) error { return Overcommit(w, s.Overcommit.Result) }
		case suite.ChartOvercommitFleet:
			draw = func(w io.Writer) error { return OvercommitFleet(w, s.OvercommitFleet.Result) }
		case suite.ChartChaos:
			draw = func(w io.Writer) error { return Chaos(w, s.Chaos.Result) }
		default:
			return nil, fmt.Errorf("charts: no drawing for %s", c.File)
		}
		if err := writeChart(filepath.Join(dir, c.File), draw); err != nil {
			return nil, fmt.Errorf("charts: %s: %w", c.File, err)
		}
	}
	return charts, nil
}

func writeChart(path string, draw func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = draw(f)
	return errors.Join(err, f.Close())
}

// The plots' size.
const (
	plotWidth  = 16 * vg.Centimeter
	plotHeight = 10 * vg.Centimeter
)

func savePNG(w io.Writer, p *plot.Plot) error {
	wt, err := p.WriterTo(plotWidth, plotHeight, "png")
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

// E2EThroughput draws placed tasks/s against offered tasks/s, one point
// per step (filled when the step held), with the line y = x.
func E2EThroughput(w io.Writer, r e2ebench.Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("e2e throughput (%d replicas, %s nodes)", r.Replicas, suite.Count(float64(r.Nodes)))
	p.X.Label.Text = "offered tasks/s"
	p.Y.Label.Text = "placed tasks/s"
	p.Legend.Top, p.Legend.Left = true, true
	var all, held, broke plotter.XYs
	top := 0.0
	for _, s := range r.Steps {
		pt := plotter.XY{X: s.OfferedTasksPerSec, Y: s.PlacedTasksPerSec}
		all = append(all, pt)
		if s.Sustained {
			held = append(held, pt)
		} else {
			broke = append(broke, pt)
		}
		top = max(top, pt.X, pt.Y)
	}
	p.X.Min, p.Y.Min, p.X.Max, p.Y.Max = 0, 0, top*1.05, top*1.05
	p.X.Tick.Marker, p.Y.Tick.Marker = countTicks{}, countTicks{}
	ideal := plotter.NewFunction(func(x float64) float64 { return x })
	ideal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	ideal.Color = color.Gray{Y: 128}
	p.Add(ideal, plotter.NewGrid())
	p.Legend.Add("placed = offered", ideal)
	line, err := plotter.NewLine(all)
	if err != nil {
		return err
	}
	line.Color = plotutil.Color(0)
	p.Add(line)
	for _, g := range []struct {
		pts   plotter.XYs
		name  string
		shape draw.GlyphDrawer
	}{{held, "step held", draw.CircleGlyph{}}, {broke, "step broke", draw.CrossGlyph{}}} {
		if len(g.pts) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(g.pts)
		if err != nil {
			return err
		}
		sc.Shape, sc.Color, sc.Radius = g.shape, plotutil.Color(0), vg.Points(4)
		p.Add(sc)
		p.Legend.Add(g.name, sc)
	}
	return savePNG(w, p)
}

// E2ELatency draws the p50 and p99 of submit→placed and submit→running
// against the offered tasks/s.
func E2ELatency(w io.Writer, r e2ebench.Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("e2e latency (%d replicas, %s nodes)", r.Replicas, suite.Count(float64(r.Nodes)))
	p.X.Label.Text = "offered tasks/s"
	p.Y.Label.Text = "ms"
	p.X.Min, p.Y.Min = 0, 0
	p.X.Tick.Marker, p.Y.Tick.Marker = countTicks{}, countTicks{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	series := []struct {
		name string
		y    func(e2ebench.Step) float64
	}{
		{"placed p50", func(s e2ebench.Step) float64 { return s.P50SubmitToPlacedMs }},
		{"placed p99", func(s e2ebench.Step) float64 { return s.P99SubmitToPlacedMs }},
		{"running p50", func(s e2ebench.Step) float64 { return s.P50SubmitToRunningMs }},
		{"running p99", func(s e2ebench.Step) float64 { return s.P99SubmitToRunningMs }},
	}
	for i, sr := range series {
		pts := make(plotter.XYs, len(r.Steps))
		for j, s := range r.Steps {
			pts[j] = plotter.XY{X: s.OfferedTasksPerSec, Y: sr.y(s)}
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		// Placed in one colour, running in another; p99 dashed.
		l.Color, sc.Color = plotutil.Color(i/2), plotutil.Color(i/2)
		if i%2 == 1 {
			l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		sc.Shape = plotutil.Shape(i)
		p.Add(l, sc)
		p.Legend.Add(sr.name, l, sc)
	}
	return savePNG(w, p)
}

// Raftkv draws the writes/s of Sluice's store and etcd side by side,
// one panel per comparison that has the etcd anchor (their scales differ
// by orders of magnitude).
func Raftkv(w io.Writer, cs []storebench.Comparison) error {
	var row []*plot.Plot
	for _, c := range cs {
		if c.Etcd == nil {
			continue
		}
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%d writers × %s", c.Writers, suite.ByteSize(c.ValueBytes))
		p.Y.Label.Text = "writes/s"
		p.Y.Min = 0
		bars, err := plotter.NewBarChart(plotter.Values{c.Sluice.WritesPerSec, c.Etcd.WritesPerSec}, vg.Centimeter)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(0)
		p.Add(bars, &plotter.Grid{Horizontal: plotter.NewGrid().Horizontal})
		p.NominalX("sluice", "etcd")
		barAxes(p, 2)
		row = append(row, p)
	}
	if len(row) == 0 {
		return errors.New("no comparison with etcd")
	}
	img := vgimg.New(plotWidth, plotHeight)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Millimeter, PadY: vg.Millimeter,
		PadTop: vg.Points(2), PadBottom: vg.Points(2), PadLeft: vg.Points(2), PadRight: vg.Points(2)}
	canvases := plot.Align([][]*plot.Plot{row}, tiles, dc)
	for i, p := range row {
		p.Draw(canvases[0][i])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

// Submit draws the jobs committed per second of each body encoding.
func Submit(w io.Writer, rs []submitbench.Result) error {
	p := plot.New()
	if len(rs) > 0 {
		r := rs[0]
		p.Title.Text = fmt.Sprintf("submit (%d replicas, %d clients, %s jobs per request)", r.Replicas, r.Clients, suite.Count(float64(r.JobsPerRequest)))
	}
	p.Y.Label.Text = "jobs committed/s"
	p.Y.Min = 0
	vals := make(plotter.Values, len(rs))
	names := make([]string, len(rs))
	for i, r := range rs {
		vals[i], names[i] = r.JobsPerSec, suite.EncodingName(r.Encoding)
	}
	bars, err := plotter.NewBarChart(vals, 1.5*vg.Centimeter)
	if err != nil {
		return err
	}
	bars.Color = plotutil.Color(0)
	p.Add(bars, &plotter.Grid{Horizontal: plotter.NewGrid().Horizontal})
	p.NominalX(names...)
	barAxes(p, len(rs))
	return savePNG(w, p)
}

// Overcommit draws, over the run's time, the CPU allocated (both tiers'
// requests over capacity) and the host's CPU utilisation, in percent,
// with the target and Hippo's figure as dashed lines.
func Overcommit(w io.Writer, r overcommitbench.Result) error {
	if len(r.Series) == 0 {
		return errors.New("no time series")
	}
	t, alloc, util := make([]float64, len(r.Series)), make([]float64, len(r.Series)), make([]float64, len(r.Series))
	for i, s := range r.Series {
		t[i], alloc[i], util[i] = s.T, s.Allocation, s.Utilization
	}
	return allocationPlot(w, fmt.Sprintf("overcommit (%sm CPU, online asks %.0f%%)", suite.Count(float64(r.NodeCPU)), 100*r.OnlineRequestRatio),
		"% of the node's CPU", "host utilisation", r.AllocationRatio, t, alloc, util)
}

// OvercommitFleet draws, over the run's time, the fleet's CPU allocated
// and what its heartbeats report used, in percent of its capacity, with
// the target and Hippo's figure as dashed lines.
func OvercommitFleet(w io.Writer, r overcommitbench.FleetResult) error {
	if len(r.Series) == 0 {
		return errors.New("no time series")
	}
	t, alloc, util := make([]float64, len(r.Series)), make([]float64, len(r.Series)), make([]float64, len(r.Series))
	peak := 0.0
	for i, s := range r.Series {
		t[i], alloc[i], util[i] = s.T, s.AllocationRatio, s.Utilization
		peak = max(peak, s.AllocationRatio)
	}
	return allocationPlot(w, fmt.Sprintf("overcommit, %s simulated nodes (online peaks %gs of %gs)", suite.Count(float64(r.Nodes)), r.PeakSeconds, r.PeriodSeconds),
		"% of the fleet's CPU", "used (heartbeats)", peak, t, alloc, util)
}

// allocationPlot draws allocated and used (fractions of a capacity) over
// t, in percent, with the overcommit target and Hippo's figure as dashed
// lines; top is the largest allocation, for the y axis.
func allocationPlot(w io.Writer, title, yLabel, usedName string, top float64, t, alloc, used []float64) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "s"
	p.Y.Label.Text = yLabel
	p.X.Min, p.Y.Min = 0, 0
	p.Y.Max = 100 * max(2, top*1.1)
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	for i, ref := range []struct {
		name string
		y    float64
	}{{"target", 100 * overcommitbench.TargetAllocation}, {"Hippo", 100 * overcommitbench.HippoAllocation}} {
		f := plotter.NewFunction(func(float64) float64 { return ref.y })
		f.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		f.Color = color.Gray{Y: uint8(96 + 64*i)}
		p.Add(f)
		p.Legend.Add(fmt.Sprintf("%s %.0f%%", ref.name, ref.y), f)
	}
	for i, sr := range []struct {
		name string
		y    []float64
	}{{"allocated", alloc}, {usedName, used}} {
		pts := make(plotter.XYs, len(t))
		for j := range t {
			pts[j] = plotter.XY{X: t[j], Y: 100 * sr.y[j]}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(sr.name, l)
	}
	return savePNG(w, p)
}

// Chaos draws, for each fault in schedule order, its unavailability
// (injection to the next probe placed) and its worst wait (the longest
// submit→placed of a probe sent during the fault), side by side.
func Chaos(w io.Writer, r chaosbench.Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("chaos, seed %d: %d faults, %d lost, %d duplicates, linearizable %s",
		r.Seed, r.Faults, r.Lost, r.Duplicates, r.Linearizable)
	p.Y.Label.Text = "ms"
	p.Y.Min = 0
	unavail := make(plotter.Values, len(r.Sched))
	wait := make(plotter.Values, len(r.Sched))
	names := make([]string, len(r.Sched))
	for i, f := range r.Sched {
		unavail[i], wait[i] = float64(max(f.UnavailableMs, 0)), float64(f.WorstWaitMs)
		names[i] = fmt.Sprintf("%d %s", i+1, f.Kind)
	}
	const width = 0.25 * vg.Centimeter
	for i, series := range []struct {
		name string
		vals plotter.Values
	}{{"unavailable: fault → next probe placed", unavail}, {"worst wait of a probe sent during it", wait}} {
		bars, err := plotter.NewBarChart(series.vals, width)
		if err != nil {
			return err
		}
		bars.Color = plotutil.Color(i + 1)
		bars.Offset = vg.Length(2*i-1) * width / 2
		p.Add(bars)
		p.Legend.Add(series.name, bars)
	}
	p.Add(&plotter.Grid{Horizontal: plotter.NewGrid().Horizontal})
	p.Legend.Top = true
	// Headroom above the tallest bar for the legend.
	tallest := 1.0
	for i := range unavail {
		tallest = max(tallest, unavail[i], wait[i])
	}
	p.Y.Max = 1.3 * tallest
	p.NominalX(names...)
	p.X.Tick.Label.Rotation = math.Pi / 2
	p.X.Tick.Label.XAlign, p.X.Tick.Label.YAlign = draw.XRight, draw.YCenter
	barAxes(p, len(r.Sched))
	return savePNG(w, p)
}

// barAxes gives n bars room at both ends and counts on the y axis.
func barAxes(p *plot.Plot, n int) {
	p.X.Min, p.X.Max = -0.6, float64(n)-0.4
	p.Y.Tick.Marker = countTicks{}
}

// countTicks are plot.DefaultTicks labelled as counts (12,000, not
// 12000.00).
type countTicks struct{}

func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = suite.Count(ts[i].Value)
		}
	}
	return ts
}

// Soak draws a soak's rows against the time at each row's end, in three
// panels one above the other: offered and placed tasks/s; p99
// submit→placed and submit→running with their limits; and each process's
// peak RSS.
func Soak(w io.Writer, r e2ebench.SoakResult) error {
	if len(r.Rows) == 0 {
		return errors.New("a soak without rows")
	}
	at := func(row e2ebench.SoakRow) float64 { return (row.StartSeconds + row.Seconds) / 60 }
	end := at(r.Rows[len(r.Rows)-1])
	panel := func(title, ylabel string) *plot.Plot {
		p := plot.New()
		p.Title.Text = title
		p.X.Label.Text = "minutes"
		p.Y.Label.Text = ylabel
		p.X.Min, p.X.Max, p.Y.Min = 0, end, 0
		p.Y.Tick.Marker = countTicks{}
		p.Legend.Top, p.Legend.Left = false, false
		p.Add(plotter.NewGrid())
		return p
	}
	type series struct {
		name string
		y    func(e2ebench.SoakRow) float64
	}
	lines := func(p *plot.Plot, ss []series) error {
		for i, sr := range ss {
			pts := make(plotter.XYs, len(r.Rows))
			for j, row := range r.Rows {
				pts[j] = plotter.XY{X: at(row), Y: sr.y(row)}
			}
			l, sc, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color, sc.Color, sc.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
			p.Add(l, sc)
			p.Legend.Add(sr.name, l, sc)
		}
		return nil
	}
	limit := func(p *plot.Plot, y float64, i int, name string) {
		if y <= 0 {
			return
		}
		f := plotter.NewFunction(func(float64) float64 { return y })
		f.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		f.Color = plotutil.Color(i)
		p.Add(f)
		p.Legend.Add(name, f)
	}

	rate := panel(fmt.Sprintf("soak at %s tasks/s (%d replicas, %s nodes)", suite.Count(r.TargetTasksPerSec), r.Replicas, suite.Count(float64(r.Nodes))), "tasks/s")
	rate.Legend.Top = false
	if err := lines(rate, []series{
		{"offered", func(row e2ebench.SoakRow) float64 { return row.OfferedTasksPerSec }},
		{"placed", func(row e2ebench.SoakRow) float64 { return row.PlacedTasksPerSec }},
	}); err != nil {
		return err
	}
	lat := panel("p99 latency", "ms")
	lat.Legend.Top = true
	if err := lines(lat, []series{
		{"submit→placed", func(row e2ebench.SoakRow) float64 { return row.P99SubmitToPlacedMs }},
		{"submit→running", func(row e2ebench.SoakRow) float64 { return row.P99SubmitToRunningMs }},
	}); err != nil {
		return err
	}
	limit(lat, r.P99PlacedLimitMs, 0, "placed limit")
	limit(lat, r.P99RunningLimitMs, 1, "running limit")
	// Room above the lines and the limits for the legend.
	top := max(r.P99PlacedLimitMs, r.P99RunningLimitMs)
	for _, row := range r.Rows {
		top = max(top, row.P99SubmitToPlacedMs, row.P99SubmitToRunningMs)
	}
	lat.Y.Max = 2 * top
	mem := panel("peak RSS per row", "MiB")
	var ss []series
	for i, name := range r.Processes {
		ss = append(ss, series{name, func(row e2ebench.SoakRow) float64 {
			if i < len(row.RSSMiB) {
				return row.RSSMiB[i]
			}
			return 0
		}})
	}
	if err := lines(mem, ss); err != nil {
		return err
	}

	img := vgimg.New(plotWidth, 2*plotHeight)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 3, Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: vg.Points(2), PadBottom: vg.Points(2), PadLeft: vg.Points(2), PadRight: vg.Points(2)}
	col := [][]*plot.Plot{{rate}, {lat}, {mem}}
	canvases := plot.Align(col, tiles, dc)
	for i := range col {
		col[i][0].Draw(canvases[i][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}
