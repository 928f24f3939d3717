package loadgen

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Item is one job of a workload's stream.
type Item struct {
	// Seq numbers the jobs of the stream from 0.
	Seq int64
	// At is the job's arrival, as an offset from the stream's start.
	At time.Duration
	// Job is the job to submit. Its Tasks has one group; its pod one
	// container and a SimSpec.
	Job api.JobSpec
}

// Generator produces a Workload's stream of jobs, in order of arrival.
// The stream depends only on the Workload, its Seed included: arrivals
// and job shapes are drawn from two separate seeded streams, so changing
// the arrival process does not change the jobs, nor the reverse. A
// Generator is not safe for concurrent use.
type Generator struct {
	w        Workload
	arrivals *rand.Rand // arrival gaps
	shapes   *rand.Rand // everything about a job
	size     intSampler
	shape    picker
	queue    picker
	priority picker

	seq     int64
	at      time.Duration // the next arrival
	inBurst int64         // jobs of the current burst already produced
	done    bool
}

// NewGenerator validates w and returns the generator of its stream.
func NewGenerator(w Workload) (*Generator, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	return newGenerator(w.WithDefaults()), nil
}

// newGenerator trusts w, with defaults applied, to be valid.
func newGenerator(w Workload) *Generator {
	g := &Generator{
		w:        w,
		arrivals: rand.New(rand.NewPCG(w.Seed, 0xa7715a1)),
		shapes:   rand.New(rand.NewPCG(w.Seed, 0x5ba9e5)),
	}
	g.size = newIntSampler(w.ArraySize, g.shapes)
	ws := make([]float64, len(w.Shapes))
	for i, s := range w.Shapes {
		ws[i] = s.Weight
	}
	g.shape = newPicker(ws)
	ws = make([]float64, len(w.Queues))
	for i, q := range w.Queues {
		ws[i] = q.Weight
	}
	g.queue = newPicker(ws)
	ws = make([]float64, len(w.Priorities))
	for i, p := range w.Priorities {
		ws[i] = p.Weight
	}
	g.priority = newPicker(ws)
	if w.Arrival.Process == ArrivalPoisson {
		g.at = g.gap()
	}
	return g
}

// Workload returns the generator's workload, with defaults applied.
func (g *Generator) Workload() Workload { return g.w }

// Next returns the next job, or false when the stream has ended.
func (g *Generator) Next() (Item, bool) {
	if g.done || g.w.Jobs > 0 && g.seq >= g.w.Jobs || g.w.Duration > 0 && g.at >= g.w.Duration.Std() {
		g.done = true
		return Item{}, false
	}
	it := Item{Seq: g.seq, At: g.at, Job: g.job()}
	g.seq++
	g.advance()
	return it, true
}

// advance moves g.at to the next arrival.
func (g *Generator) advance() {
	a := g.w.Arrival
	switch a.Process {
	case ArrivalBursts:
		g.inBurst++
		if g.inBurst == a.Burst {
			g.inBurst = 0
			g.at += a.Period.Std()
		}
	case ArrivalPoisson:
		g.at += g.gap()
	default:
		// The seq-th arrival at seq/rate, computed afresh so that
		// rounding does not accumulate.
		g.at = time.Duration(math.Round(float64(g.seq) / a.Rate * 1e9))
	}
	if g.at < 0 { // overflow after ~292 years of offsets
		g.done = true
	}
}

// gap draws an exponential inter-arrival time of mean 1/Rate.
func (g *Generator) gap() time.Duration {
	return time.Duration(g.arrivals.ExpFloat64() / g.w.Arrival.Rate * 1e9)
}

// job draws the next job's shape. The draws happen in a fixed order, each
// whatever the workload, except pickers of one choice, which draw nothing.
func (g *Generator) job() api.JobSpec {
	w := &g.w
	r := g.shapes
	count := g.size.draw(r)
	sh := w.Shapes[g.shape.pick(r)]
	run := w.RunTime.draw(r)
	qos := api.QoSOffline
	if r.Float64() < w.OnlineFraction {
		qos = api.QoSOnline
	}
	j := api.JobSpec{
		Name: w.Name,
		Pool: w.Pool,
		QoS:  qos,
		Tasks: []api.TaskGroupSpec{{
			Count: count,
			Pod: api.PodSpec{
				Containers: []api.ContainerSpec{{
					Image:     api.Image{Rootfs: w.Rootfs},
					Command:   append([]string(nil), w.Command...),
					Resources: api.Resources{CPU: sh.CPU, Memory: sh.Memory},
				}},
				Sim: &api.SimSpec{RunTime: api.Duration(run)},
			},
		}},
	}
	if len(w.Queues) > 0 {
		j.Queue = w.Queues[g.queue.pick(r)].Name
	}
	if len(w.Priorities) > 0 {
		j.Priority = w.Priorities[g.priority.pick(r)].Priority
	}
	return j
}
