package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/api"
)

// Distribution kinds, the word before the colon of a distribution's text
// form.
const (
	KindFixed   = "fixed"
	KindUniform = "uniform"
	KindZipf    = "zipf"
)

// IntDist is a distribution of positive integers (an array's size). Its
// text form, in flags and in workload files, is one of
//
//	"fixed:N"        always N (a bare number N means the same)
//	"uniform:A,B"    uniform on A..B, both included
//	"zipf:S,MAX"     Zipf with exponent S > 1 on 1..MAX: 1 most often
//
// The zero IntDist is invalid; Validate says so.
type IntDist struct {
	// Kind is KindFixed, KindUniform or KindZipf.
	Kind string
	// Min and Max bound the values: both equal N for fixed; Min is 1 for
	// zipf.
	Min, Max int64
	// S is zipf's exponent.
	S float64
}

// Fixed returns the distribution that is always n.
func Fixed(n int64) IntDist { return IntDist{Kind: KindFixed, Min: n, Max: n} }

// ParseIntDist parses the text form of an IntDist. It checks the syntax
// only; Validate checks the values.
func ParseIntDist(s string) (IntDist, error) {
	kind, args, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		n, err := strconv.ParseInt(kind, 10, 64)
		if err != nil {
			return IntDist{}, fmt.Errorf("distribution %q: want fixed:N, uniform:A,B, zipf:S,MAX or a number", s)
		}
		return Fixed(n), nil
	}
	parts := strings.Split(args, ",")
	ints := func(want int) ([]int64, error) {
		if len(parts) != want {
			return nil, fmt.Errorf("distribution %q: %s takes %d numbers", s, kind, want)
		}
		out := make([]int64, want)
		for i, p := range parts {
			n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("distribution %q: %q is not an integer", s, p)
			}
			out[i] = n
		}
		return out, nil
	}
	switch kind {
	case KindFixed:
		v, err := ints(1)
		if err != nil {
			return IntDist{}, err
		}
		return Fixed(v[0]), nil
	case KindUniform:
		v, err := ints(2)
		if err != nil {
			return IntDist{}, err
		}
		return IntDist{Kind: KindUniform, Min: v[0], Max: v[1]}, nil
	case KindZipf:
		if len(parts) != 2 {
			return IntDist{}, fmt.Errorf("distribution %q: zipf takes an exponent and a maximum", s)
		}
		sv, err := strconv.ParseFloat(strings.TrimSpace(parts[0]), 64)
		if err != nil {
			return IntDist{}, fmt.Errorf("distribution %q: exponent %q is not a number", s, parts[0])
		}
		m, err := strconv.ParseInt(strings.TrimSpace(parts[1]), 10, 64)
		if err != nil {
			return IntDist{}, fmt.Errorf("distribution %q: maximum %q is not an integer", s, parts[1])
		}
		return IntDist{Kind: KindZipf, Min: 1, Max: m, S: sv}, nil
	default:
		return IntDist{}, fmt.Errorf("distribution %q: unknown kind %q (want fixed, uniform or zipf)", s, kind)
	}
}

// String returns the text form.
func (d IntDist) String() string {
	switch d.Kind {
	case KindFixed:
		return fmt.Sprintf("fixed:%d", d.Min)
	case KindUniform:
		return fmt.Sprintf("uniform:%d,%d", d.Min, d.Max)
	case KindZipf:
		return fmt.Sprintf("zipf:%s,%d", strconv.FormatFloat(d.S, 'g', -1, 64), d.Max)
	}
	return ""
}

// problems lists what is wrong with d, each prefixed with path.
func (d IntDist) problems(path string, hi int64) []string {
	var out []string
	switch d.Kind {
	case KindFixed, KindUniform:
		if d.Min < 1 || d.Max > hi || d.Min > d.Max {
			out = append(out, fmt.Sprintf("%s: %s: want 1 <= min <= max <= %d", path, d, hi))
		}
	case KindZipf:
		if !(d.S > 1) || math.IsInf(d.S, 0) {
			out = append(out, fmt.Sprintf("%s: %s: the exponent must be a number above 1", path, d))
		}
		if d.Max < 1 || d.Max > hi {
			out = append(out, fmt.Sprintf("%s: %s: want 1 <= max <= %d", path, d, hi))
		}
	case "":
		out = append(out, path+": missing (want fixed:N, uniform:A,B or zipf:S,MAX)")
	default:
		out = append(out, fmt.Sprintf("%s: unknown kind %q", path, d.Kind))
	}
	return out
}

// Mean returns the distribution's mean (for zipf, computed by summation).
func (d IntDist) Mean() float64 {
	switch d.Kind {
	case KindFixed, KindUniform:
		return float64(d.Min+d.Max) / 2
	case KindZipf:
		// rand.Zipf draws k in 0..max-1 with weight (1+k)^-s.
		var num, den float64
		for k := int64(1); k <= d.Max; k++ {
			w := math.Pow(float64(k), -d.S)
			num += float64(k) * w
			den += w
		}
		if den == 0 {
			return 0
		}
		return num / den
	}
	return 0
}

// MarshalText implements encoding.TextMarshaler.
func (d IntDist) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (flags).
func (d *IntDist) UnmarshalText(b []byte) error {
	v, err := ParseIntDist(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// UnmarshalJSON takes the text form as a string, or a number for fixed.
func (d *IntDist) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return d.UnmarshalText([]byte(s))
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer or a string such as \"uniform:1,100\", got %s", clip(string(b)))
	}
	*d = Fixed(n)
	return nil
}

// sampler draws from a valid IntDist.
type intSampler struct {
	d    IntDist
	zipf *rand.Zipf
}

func newIntSampler(d IntDist, r *rand.Rand) intSampler {
	s := intSampler{d: d}
	if d.Kind == KindZipf && d.Max > 1 {
		s.zipf = rand.NewZipf(r, d.S, 1, uint64(d.Max-1))
	}
	return s
}

func (s intSampler) draw(r *rand.Rand) int64 {
	switch s.d.Kind {
	case KindUniform:
		return s.d.Min + r.Int64N(s.d.Max-s.d.Min+1)
	case KindZipf:
		if s.zipf == nil {
			return 1
		}
		return 1 + int64(s.zipf.Uint64())
	}
	return s.d.Min
}

// DurationDist is a distribution of durations (a simulated task's run
// time). Its text form is "fixed:D" (a bare duration D means the same) or
// "uniform:A,B", with Go durations such as "250ms".
type DurationDist struct {
	// Kind is KindFixed or KindUniform.
	Kind string
	// Min and Max bound the values; equal for fixed.
	Min, Max time.Duration
}

// MaxRunTime is the longest run time a DurationDist may draw.
const MaxRunTime = 7 * 24 * time.Hour

// FixedDuration returns the distribution that is always d.
func FixedDuration(d time.Duration) DurationDist {
	return DurationDist{Kind: KindFixed, Min: d, Max: d}
}

// ParseDurationDist parses the text form of a DurationDist.
func ParseDurationDist(s string) (DurationDist, error) {
	kind, args, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		d, err := time.ParseDuration(kind)
		if err != nil {
			return DurationDist{}, fmt.Errorf("duration distribution %q: want fixed:D, uniform:A,B or a duration such as 1s", s)
		}
		return FixedDuration(d), nil
	}
	parts := strings.Split(args, ",")
	var ds []time.Duration
	for _, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return DurationDist{}, fmt.Errorf("duration distribution %q: %q is not a duration", s, p)
		}
		ds = append(ds, d)
	}
	switch {
	case kind == KindFixed && len(ds) == 1:
		return FixedDuration(ds[0]), nil
	case kind == KindUniform && len(ds) == 2:
		return DurationDist{Kind: KindUniform, Min: ds[0], Max: ds[1]}, nil
	case kind == KindFixed || kind == KindUniform:
		return DurationDist{}, fmt.Errorf("duration distribution %q: fixed takes one duration, uniform two", s)
	default:
		return DurationDist{}, fmt.Errorf("duration distribution %q: unknown kind %q (want fixed or uniform)", s, kind)
	}
}

// String returns the text form.
func (d DurationDist) String() string {
	switch d.Kind {
	case KindFixed:
		return "fixed:" + d.Min.String()
	case KindUniform:
		return "uniform:" + d.Min.String() + "," + d.Max.String()
	}
	return ""
}

func (d DurationDist) problems(path string) []string {
	switch d.Kind {
	case KindFixed, KindUniform:
		if d.Min < 0 || d.Min > d.Max || d.Max > MaxRunTime {
			return []string{fmt.Sprintf("%s: %s: want 0 <= min <= max <= %v", path, d, MaxRunTime)}
		}
	case "":
		return []string{path + ": missing (want fixed:D or uniform:A,B)"}
	default:
		return []string{fmt.Sprintf("%s: unknown kind %q", path, d.Kind)}
	}
	return nil
}

func (d DurationDist) draw(r *rand.Rand) time.Duration {
	if d.Kind == KindUniform && d.Max > d.Min {
		return d.Min + time.Duration(r.Int64N(int64(d.Max-d.Min)+1))
	}
	return d.Min
}

// MarshalText implements encoding.TextMarshaler.
func (d DurationDist) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *DurationDist) UnmarshalText(b []byte) error {
	v, err := ParseDurationDist(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// UnmarshalJSON takes the text form as a string.
func (d *DurationDist) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a string such as \"uniform:100ms,2s\", got %s", clip(string(b)))
	}
	return d.UnmarshalText([]byte(s))
}

// Shape is one resource shape of a task's container, with its weight in
// the mix. In JSON: {"cpu": "500m", "memory": "512Mi", "weight": 3}; its
// text form (flags) is "CPU/MEMORY" or "CPU/MEMORY=WEIGHT", such as
// "500m/512Mi=3".
type Shape struct {
	// CPU in millicores; Memory in bytes.
	CPU, Memory int64
	// Weight is the shape's share of the mix, relative to the others.
	// Default 1.
	Weight float64
}

type shapeJSON struct {
	CPU    json.RawMessage `json:"cpu"`
	Memory json.RawMessage `json:"memory"`
	Weight float64         `json:"weight,omitempty"`
}

// ParseShape parses the text form of a Shape.
func ParseShape(s string) (Shape, error) {
	res, w, hasW := strings.Cut(strings.TrimSpace(s), "=")
	cpu, mem, ok := strings.Cut(res, "/")
	if !ok {
		return Shape{}, fmt.Errorf("shape %q: want CPU/MEMORY[=WEIGHT], such as 500m/512Mi=3", s)
	}
	var sh Shape
	var err error
	if sh.CPU, err = api.ParseCPU(cpu); err != nil {
		return Shape{}, fmt.Errorf("shape %q: cpu: %w", s, err)
	}
	if sh.Memory, err = api.ParseBytes(mem); err != nil {
		return Shape{}, fmt.Errorf("shape %q: memory: %w", s, err)
	}
	if hasW {
		if sh.Weight, err = strconv.ParseFloat(w, 64); err != nil {
			return Shape{}, fmt.Errorf("shape %q: weight %q is not a number", s, w)
		}
	}
	return sh, nil
}

// String returns the text form.
func (s Shape) String() string {
	out := fmt.Sprintf("%dm/%d", s.CPU, s.Memory)
	if s.Weight != 0 {
		out += "=" + strconv.FormatFloat(s.Weight, 'g', -1, 64)
	}
	return out
}

// UnmarshalJSON reads {"cpu", "memory", "weight"}; cpu and memory are
// quantity strings ("500m", "512Mi") or numbers (millicores, bytes).
func (s *Shape) UnmarshalJSON(b []byte) error {
	var raw shapeJSON
	errs := decodeStrict(b, &raw)
	var sh Shape
	var err error
	if sh.CPU, err = quantity(raw.CPU, api.ParseCPU, 1000); err != nil {
		errs = append(errs, fmt.Errorf("cpu: %w", err))
	}
	if sh.Memory, err = quantity(raw.Memory, api.ParseBytes, 1); err != nil {
		errs = append(errs, fmt.Errorf("memory: %w", err))
	}
	if len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	sh.Weight = raw.Weight
	*s = sh
	return nil
}

// MarshalJSON writes the object form with quantity strings.
func (s Shape) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		CPU    string  `json:"cpu"`
		Memory string  `json:"memory"`
		Weight float64 `json:"weight,omitempty"`
	}{fmt.Sprintf("%dm", s.CPU), strconv.FormatInt(s.Memory, 10), s.Weight})
}

// quantity reads a quantity string with parse, or a number times unit.
func quantity(raw json.RawMessage, parse func(string) (int64, error), unit float64) (int64, error) {
	if len(raw) == 0 {
		return 0, fmt.Errorf("missing")
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, err
		}
		return parse(s)
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f < 0 || f*unit > math.MaxInt64/2 {
		return 0, fmt.Errorf("want a quantity string or a non-negative number, got %s", clip(string(raw)))
	}
	return int64(math.Round(f * unit)), nil
}

// Queue is a queue with its weight in the mix. Text form "NAME" or
// "NAME=WEIGHT".
type Queue struct {
	Name string `json:"name"`
	// Weight defaults to 1.
	Weight float64 `json:"weight,omitempty"`
}

// ParseQueue parses the text form of a Queue.
func ParseQueue(s string) (Queue, error) {
	name, w, hasW := strings.Cut(strings.TrimSpace(s), "=")
	q := Queue{Name: name}
	if hasW {
		var err error
		if q.Weight, err = strconv.ParseFloat(w, 64); err != nil {
			return Queue{}, fmt.Errorf("queue %q: weight %q is not a number", s, w)
		}
	}
	return q, nil
}

// Priority is a job priority with its weight in the mix. Text form "P" or
// "P=WEIGHT".
type Priority struct {
	Priority int32 `json:"priority"`
	// Weight defaults to 1.
	Weight float64 `json:"weight,omitempty"`
}

// ParsePriority parses the text form of a Priority.
func ParsePriority(s string) (Priority, error) {
	p, w, hasW := strings.Cut(strings.TrimSpace(s), "=")
	n, err := strconv.ParseInt(p, 10, 32)
	if err != nil {
		return Priority{}, fmt.Errorf("priority %q: %q is not an integer", s, p)
	}
	pr := Priority{Priority: int32(n)}
	if hasW {
		if pr.Weight, err = strconv.ParseFloat(w, 64); err != nil {
			return Priority{}, fmt.Errorf("priority %q: weight %q is not a number", s, w)
		}
	}
	return pr, nil
}

// weightProblems checks a weight (0 means the default, 1).
func weightProblems(path string, w float64) []string {
	if w < 0 || math.IsNaN(w) || math.IsInf(w, 0) {
		return []string{fmt.Sprintf("%s.weight: %v: want a finite number >= 0 (0 means 1)", path, w)}
	}
	return nil
}

// picker draws an index with probability proportional to its weight.
type picker struct{ cum []float64 }

func newPicker(weights []float64) picker {
	p := picker{cum: make([]float64, len(weights))}
	var sum float64
	for i, w := range weights {
		if w == 0 {
			w = 1
		}
		sum += w
		p.cum[i] = sum
	}
	return p
}

// pick returns an index; it draws nothing when there is one choice or
// none, so that adding a single default does not shift the stream.
func (p picker) pick(r *rand.Rand) int {
	if len(p.cum) <= 1 {
		return 0
	}
	x := r.Float64() * p.cum[len(p.cum)-1]
	for i, c := range p.cum {
		if x < c {
			return i
		}
	}
	return len(p.cum) - 1
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
