package flowsolver_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/sluicehq/sluice/flowsolver"
	"github.com/sluicehq/sluice/internal/seedtest"
)

// dimacsView is a graph with its IDs made dense, as WriteDIMACS numbers
// them: the nodes in use in NodeID order, and the arcs in use in ArcID order
// as {tail, head, lower, upper, cost} with the dense node indexes.
type dimacsView struct {
	Supply []int64
	Arcs   [][5]int64
}

func viewOf(g *flowsolver.Graph) dimacsView {
	index := make([]int64, g.NodeCap())
	v := dimacsView{Supply: []int64{}, Arcs: [][5]int64{}}
	for n := range flowsolver.NodeID(g.NodeCap()) {
		if g.HasNode(n) {
			index[n] = int64(len(v.Supply))
			v.Supply = append(v.Supply, g.Supply(n))
		}
	}
	for a := range flowsolver.ArcID(g.ArcCap()) {
		if g.HasArc(a) {
			t, h, lo, up, c := g.Arc(a)
			v.Arcs = append(v.Arcs, [5]int64{index[t], index[h], lo, up, c})
		}
	}
	return v
}

func readString(t *testing.T, s string) *flowsolver.Graph {
	t.Helper()
	g, err := flowsolver.ReadDIMACS(strings.NewReader(s))
	if err != nil {
		t.Fatalf("ReadDIMACS: %v\ninput:\n%s", err, s)
	}
	return g
}

// checkDIMACSRoundTrip writes g, reads it back, and fails unless the result
// is g with dense IDs. It returns what was written.
func checkDIMACSRoundTrip(t *testing.T, g *flowsolver.Graph) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := flowsolver.WriteDIMACS(&buf, g); err != nil {
		t.Fatalf("WriteDIMACS: %v", err)
	}
	back, err := flowsolver.ReadDIMACS(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("reading back what WriteDIMACS wrote: %v\n%s", err, buf.Bytes())
	}
	if back.Nodes() != back.NodeCap() || back.Arcs() != back.ArcCap() {
		t.Fatalf("ReadDIMACS made a graph with holes: %d/%d nodes, %d/%d arcs", back.Nodes(), back.NodeCap(), back.Arcs(), back.ArcCap())
	}
	if want, got := viewOf(g), viewOf(back); !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the graph\nwant %+v\ngot  %+v\nwritten:\n%s", want, got, buf.Bytes())
	}
	return buf.Bytes()
}

func TestReadDIMACS(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     dimacsView
	}{
		{"empty graph", "p min 0 0\n", dimacsView{Supply: []int64{}, Arcs: [][5]int64{}}},
		{"no arcs", "p min 2 0", dimacsView{Supply: []int64{0, 0}, Arcs: [][5]int64{}}},
		{
			"textbook",
			"c NetworkX's example\nc optimal 24\np min 4 4\nn 1 5\nn 4 -5\na 1 2 0 4 3\na 1 3 0 10 6\na 2 4 0 9 1\na 3 4 0 5 2\n",
			dimacsView{
				Supply: []int64{5, 0, 0, -5},
				Arcs:   [][5]int64{{0, 1, 0, 4, 3}, {0, 2, 0, 10, 6}, {1, 3, 0, 9, 1}, {2, 3, 0, 5, 2}},
			},
		},
		{
			"layout: CRLF, tabs, indentation, blank lines, bare c, comments anywhere",
			"c\r\n\r\n  c indented\r\n\tp\tmin  3   2 \r\n \t \r\nc between\r\n n 3 -1\r\na 1 3 0 1 0\r\n\r\nc\ta 9 9 9 9 9\r\n  a\t2 2 1 1 1\t\r\nn 1 1\r\nc last",
			dimacsView{Supply: []int64{1, 0, -1}, Arcs: [][5]int64{{0, 2, 0, 1, 0}, {1, 1, 1, 1, 1}}},
		},
		{
			"number forms: sign, leading zeros, minus zero",
			"p min 002 +1\nn +1 -0\nn 02 0\na 01 +2 -0 0007 -000\n",
			dimacsView{Supply: []int64{0, 0}, Arcs: [][5]int64{{0, 1, 0, 7, 0}}},
		},
		{
			"values at the limits",
			fmt.Sprintf("p min 2 2\nn 1 %d\nn 2 %d\na 1 2 %d %d %d\na 2 1 0 0 %d\n",
				flowsolver.MaxCapacity, -flowsolver.MaxCapacity, flowsolver.MaxCapacity, flowsolver.MaxCapacity, flowsolver.MaxAbsCost, -flowsolver.MaxAbsCost),
			dimacsView{
				Supply: []int64{flowsolver.MaxCapacity, -flowsolver.MaxCapacity},
				Arcs:   [][5]int64{{0, 1, flowsolver.MaxCapacity, flowsolver.MaxCapacity, flowsolver.MaxAbsCost}, {1, 0, 0, 0, -flowsolver.MaxAbsCost}},
			},
		},
		{
			"parallel arcs and self-loops",
			"p min 2 4\na 1 2 0 1 1\na 1 2 0 1 1\na 2 2 0 3 -1\na 2 2 0 3 -1\n",
			dimacsView{Supply: []int64{0, 0}, Arcs: [][5]int64{{0, 1, 0, 1, 1}, {0, 1, 0, 1, 1}, {1, 1, 0, 3, -1}, {1, 1, 0, 3, -1}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := readString(t, tc.in)
			if got := viewOf(g); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
			if g.Nodes() != g.NodeCap() || g.Arcs() != g.ArcCap() {
				t.Errorf("graph has holes: %d/%d nodes, %d/%d arcs", g.Nodes(), g.NodeCap(), g.Arcs(), g.ArcCap())
			}
			checkDIMACSRoundTrip(t, g)
		})
	}
}

func TestReadDIMACSErrors(t *testing.T) {
	long := strings.Repeat("1", 40)
	for _, tc := range []struct {
		name, in string
		line     int
		msg      string
		badGraph bool // the error also wraps ErrBadGraph
	}{
		{"empty input", "", 1, "end of input without a problem line (p min NODES ARCS)", false},
		{"comments only", "c a\n\nc b\n", 4, "end of input without a problem line", false},
		{"node before p", "n 1 5\np min 1 0\n", 1, "node line before the problem line", false},
		{"arc before p", "c\na 1 2 0 1 1\n", 2, "arc line before the problem line", false},
		{"second p", "p min 2 0\nc\np min 2 0\n", 3, "second problem line (the first is line 1)", false},
		{"p type", "p max 2 0\n", 1, `problem type "max", want min`, false},
		{"p fields", "p min 2\n", 1, "problem line has 3 fields, want 4: p min NODES ARCS", false},
		{"p extra field", "p min 2 0 0\n", 1, "problem line has 5 fields, want 4", false},
		{"negative nodes", "p min -1 0\n", 1, "node count -1 is negative", false},
		{"negative arcs", "p min 1 -1\n", 1, "arc count -1 is negative", false},
		{"too many nodes", fmt.Sprintf("p min %d 0\n", flowsolver.MaxNodes+1), 1, fmt.Sprintf("node count %d beyond the limit of %d", flowsolver.MaxNodes+1, flowsolver.MaxNodes), false},
		{"too many arcs", fmt.Sprintf("p min 2 %d\n", flowsolver.MaxDIMACSArcs+1), 1, fmt.Sprintf("arc count %d beyond the limit of %d", flowsolver.MaxDIMACSArcs+1, flowsolver.MaxDIMACSArcs), false},
		{"nodes not integer", "p min 2x 0\n", 1, `node count "2x": not an integer`, false},
		{"nodes beyond int64", "p min 9223372036854775808 0\n", 1, `node count "9223372036854775808": out of the range of int64`, false},
		{"node out of range", "p min 3 0\nn 4 1\n", 2, "node 4 out of range 1..3", false},
		{"node zero", "p min 3 0\nn 0 1\n", 2, "node 0 out of range 1..3", false},
		{"duplicate node", "p min 3 0\nn 1 2\nn 2 0\nn 1 -2\n", 4, "second node line for node 1", false},
		{"duplicate zero supply", "p min 3 0\nn 3 0\nn 3 0\n", 3, "second node line for node 3", false},
		{"node fields", "p min 3 0\nn 1\n", 2, "node line has 2 fields, want 3: n ID SUPPLY", false},
		{"supply sign only", "p min 3 0\nn 1 -\n", 2, `node supply "-": not an integer`, false},
		{"supply long", "p min 3 0\nn 1 " + long + "\n", 2, `node supply "` + long[:32] + `"...: out of the range of int64`, false},
		{"supply beyond limit", fmt.Sprintf("p min 3 0\nn 2 %d\n", -flowsolver.MaxCapacity-1), 2, fmt.Sprintf("node 2: flowsolver: bad graph: supply %d beyond the limit", -flowsolver.MaxCapacity-1), true},
		{"arc head out of range", "p min 10 1\n\nc x\na 1 12 0 1 1\n", 4, "arc head 12 out of range 1..10", false},
		{"arc tail zero", "p min 2 1\na 0 2 0 1 1\n", 2, "arc tail 0 out of range 1..2", false},
		{"arc few fields", "p min 2 1\na 1 2 0 1\n", 2, "arc line has 5 fields, want 6: a SRC DST LOW CAP COST", false},
		{"arc many fields", "p min 2 1\na 1 2 0 1 1 1 1 1\n", 2, "arc line has 9 fields, want 6", false},
		{"arc cost not integer", "p min 2 1\na 1 2 0 1 x\n", 2, `arc cost "x": not an integer`, false},
		{"arc lower not integer", "p min 2 1\na 1 2 1.5 2 1\n", 2, `arc lower bound "1.5": not an integer`, false},
		{"arc capacity beyond int64", "p min 2 1\na 1 2 0 -9223372036854775809 1\n", 2, `arc capacity "-9223372036854775809": out of the range of int64`, false},
		{"lower above upper", "p min 2 1\na 1 2 3 2 1\n", 2, "arc 1->2: flowsolver: bad graph: bounds [3, 2]", true},
		{"negative lower", "p min 2 1\na 2 1 -1 2 1\n", 2, "arc 2->1: flowsolver: bad graph: bounds [-1, 2]", true},
		{"capacity beyond limit", fmt.Sprintf("p min 2 1\na 1 2 0 %d 1\n", flowsolver.MaxCapacity+1), 2, fmt.Sprintf("arc 1->2: flowsolver: bad graph: capacity %d beyond the limit of ±%d", flowsolver.MaxCapacity+1, flowsolver.MaxCapacity), true},
		{"cost beyond limit", fmt.Sprintf("p min 2 1\na 1 2 0 1 %d\n", flowsolver.MaxAbsCost+1), 2, fmt.Sprintf("arc 1->2: flowsolver: bad graph: cost %d beyond the limit of ±%d", flowsolver.MaxAbsCost+1, flowsolver.MaxAbsCost), true},
		{"more arcs than declared", "p min 2 1\na 1 2 0 1 1\na 2 1 0 1 1\n", 3, "more arcs than the 1 declared on line 1", false},
		{"fewer arcs than declared", "c\np min 2 2\na 1 2 0 1 1\n", 2, "problem line declares 2 arcs, the input has 1", false},
		{"unknown line type", "p min 2 0\nx 1 2\n", 2, `unknown line type "x" (want c, p, n or a)`, false},
		{"comment without a space", "cfoo\n", 1, `unknown line type "cfoo"`, false},
		{"solution line", "p min 2 0\nf 1 2 3\n", 2, `unknown line type "f"`, false},
		{"line too long", "p min 1 0\nc " + strings.Repeat("x", flowsolver.MaxDIMACSLine), 2, fmt.Sprintf("longer than %d bytes", flowsolver.MaxDIMACSLine), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := flowsolver.ReadDIMACS(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("no error; read %+v", viewOf(g))
			}
			if g != nil {
				t.Errorf("a graph came with the error")
			}
			if !errors.Is(err, flowsolver.ErrDIMACS) {
				t.Errorf("error %v does not wrap ErrDIMACS", err)
			}
			if got := errors.Is(err, flowsolver.ErrBadGraph); got != tc.badGraph {
				t.Errorf("errors.Is(%v, ErrBadGraph) = %v, want %v", err, got, tc.badGraph)
			}
			want := fmt.Sprintf("flowsolver: bad DIMACS input: line %d: %s", tc.line, tc.msg)
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error\n%v\nwant it to start with\n%s", err, want)
			}
		})
	}
}

func TestReadDIMACSReaderError(t *testing.T) {
	disk := errors.New("disk on fire")
	_, err := flowsolver.ReadDIMACS(io.MultiReader(strings.NewReader("p min 2 0\nn 1 1\n"), iotest.ErrReader(disk)))
	if !errors.Is(err, disk) || errors.Is(err, flowsolver.ErrDIMACS) {
		t.Fatalf("got %v, want the reader's error and not ErrDIMACS", err)
	}
	if want := "read DIMACS: line 3: disk on fire"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
}

// TestWriteDIMACS pins the output format and the node numbering of a graph
// with a removed node.
func TestWriteDIMACS(t *testing.T) {
	g := flowsolver.NewGraph(4, 3)
	var n [4]flowsolver.NodeID
	for i, s := range []int64{3, 7, -1, -2} {
		n[i] = dimacsAddNode(t, g, s)
	}
	dimacsAddArc(t, g, n[0], n[2], 0, 5, 1)
	dimacsAddArc(t, g, n[1], n[3], 0, 7, 1)
	dimacsAddArc(t, g, n[0], n[3], 1, 4, -2)
	dimacsAddArc(t, g, n[3], n[3], 0, 1, 1)
	if err := g.RemoveNode(n[1]); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := flowsolver.WriteDIMACS(&buf, g); err != nil {
		t.Fatal(err)
	}
	want := "p min 3 3\nn 1 3\nn 2 -1\nn 3 -2\na 1 2 0 5 1\na 1 3 1 4 -2\na 3 3 0 1 1\n"
	if buf.String() != want {
		t.Errorf("WriteDIMACS wrote\n%s\nwant\n%s", buf.String(), want)
	}
	checkDIMACSRoundTrip(t, g)

	buf.Reset()
	s := &flowsolver.Solution{Flow: []int64{2, 0, 1, 0}}
	if err := flowsolver.WriteFlows(&buf, g, s); err != nil {
		t.Fatal(err)
	}
	if want := "f 1 2 2\nf 1 3 1\n"; buf.String() != want {
		t.Errorf("WriteFlows wrote\n%s\nwant\n%s", buf.String(), want)
	}

	buf.Reset()
	if err := flowsolver.WriteFlows(&buf, g, &flowsolver.Solution{Flow: []int64{1, 2}}); err == nil || buf.Len() > 0 {
		t.Errorf("WriteFlows with 2 flows for 4 arc IDs: error %v, wrote %q", err, buf.String())
	}
	if err := flowsolver.WriteFlows(&buf, g, nil); err == nil || buf.Len() > 0 {
		t.Errorf("WriteFlows with no solution: error %v, wrote %q", err, buf.String())
	}

	full := errors.New("disk full")
	if err := flowsolver.WriteDIMACS(failWriter{full}, g); !errors.Is(err, full) {
		t.Errorf("WriteDIMACS to a failing writer: %v", err)
	}
	if err := flowsolver.WriteFlows(failWriter{full}, g, s); !errors.Is(err, full) {
		t.Errorf("WriteFlows to a failing writer: %v", err)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

// dimacsAddNode and dimacsAddArc build test graphs, failing the test on
// an error.
func dimacsAddNode(t testing.TB, g *flowsolver.Graph, supply int64) flowsolver.NodeID {
	t.Helper()
	n, err := g.AddNode(supply)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func dimacsAddArc(t testing.TB, g *flowsolver.Graph, tail, head flowsolver.NodeID, lower, upper, cost int64) flowsolver.ArcID {
	t.Helper()
	a, err := g.AddArc(tail, head, lower, upper, cost)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestDIMACSTestdata reads every instance in testdata/dimacs. Each states
// its answer in a comment, "c optimal COST" or "c infeasible", for the
// solver's tests and the sluice flow solve command's.
func TestDIMACSTestdata(t *testing.T) {
	files, err := filepath.Glob("testdata/dimacs/*.min")
	if err != nil || len(files) == 0 {
		t.Fatalf("no instances in testdata/dimacs: %v", err)
	}
	answer := regexp.MustCompile(`(?m)^c (optimal -?\d+|infeasible)\r?$`)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(answer.FindAll(b, -1)) != 1 {
				t.Errorf("want exactly one answer comment (c optimal COST or c infeasible)")
			}
			checkDIMACSRoundTrip(t, readString(t, string(b)))
		})
	}
}

// dimacsValue returns a value in [lo, hi], often one of its ends.
func dimacsValue(r *rand.Rand, lo, hi int64) int64 {
	switch r.IntN(8) {
	case 0:
		return lo
	case 1:
		return hi
	default:
		return lo + r.Int64N(hi-lo+1)
	}
}

// dimacsRandomGraph builds a graph with removed and reused node and arc
// IDs, values up to the limits, parallel arcs and self-loops.
func dimacsRandomGraph(t *testing.T, r *rand.Rand) *flowsolver.Graph {
	g := flowsolver.NewGraph(0, 0)
	var nodes []flowsolver.NodeID
	var arcs []flowsolver.ArcID
	for range r.IntN(200) {
		switch op := r.IntN(10); {
		case op < 3 || len(nodes) == 0:
			nodes = append(nodes, dimacsAddNode(t, g, dimacsValue(r, -flowsolver.MaxCapacity, flowsolver.MaxCapacity)))
		case op < 8:
			upper := dimacsValue(r, 0, flowsolver.MaxCapacity)
			a := dimacsAddArc(t, g, nodes[r.IntN(len(nodes))], nodes[r.IntN(len(nodes))],
				dimacsValue(r, 0, upper), upper, dimacsValue(r, -flowsolver.MaxAbsCost, flowsolver.MaxAbsCost))
			arcs = append(arcs, a)
		case op == 8 && len(arcs) > 0:
			i := r.IntN(len(arcs))
			if g.HasArc(arcs[i]) {
				if err := g.RemoveArc(arcs[i]); err != nil {
					t.Fatal(err)
				}
			}
			arcs = append(arcs[:i], arcs[i+1:]...)
		default:
			i := r.IntN(len(nodes))
			if err := g.RemoveNode(nodes[i]); err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes[:i], nodes[i+1:]...)
		}
	}
	return g
}

// TestDIMACSRoundTrip writes random graphs and reads them back: the result
// is the same graph with dense IDs, and writing it again gives the same
// bytes.
func TestDIMACSRoundTrip(t *testing.T) {
	r := seedtest.Rand(t)
	for range 300 {
		g := dimacsRandomGraph(t, r)
		out := checkDIMACSRoundTrip(t, g)
		again := checkDIMACSRoundTrip(t, readString(t, string(out)))
		if !bytes.Equal(again, out) {
			t.Fatalf("writing the read-back graph gave different bytes\nfirst:\n%s\nsecond:\n%s", out, again)
		}
	}
}

// lineNumber finds the line number an error names.
var lineNumber = regexp.MustCompile(`^flowsolver: bad DIMACS input: line (\d+): .`)

// FuzzReadDIMACS feeds arbitrary input to ReadDIMACS. It must not panic or
// hang; a rejection must wrap ErrDIMACS and name a line of the input (or the
// one after its end); and a graph accepted must read back unchanged from
// what WriteDIMACS writes for it.
func FuzzReadDIMACS(f *testing.F) {
	files, _ := filepath.Glob("testdata/dimacs/*.min")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("p min 3 2\r\nn 1 4\r\nn 3 -4\r\na 1 2 0 4 1\r\na 2 3 1 9 -2\r\n"))
	f.Add([]byte("c\n\tp min +2 1\n\nn 02 -0\na 2 2 3 3 16777216\n"))
	f.Add([]byte("p min 2 1\na 1 2 0 1099511627776 -16777216\nn 1 -1099511627776\n"))
	f.Add([]byte("p min 1 0\nn 1 9223372036854775808\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if declaresMoreThan(in, 1<<16) {
			t.Skip("sizes this large are covered by TestReadDIMACSErrors; allocating for them would slow the fuzzer")
		}
		g, err := flowsolver.ReadDIMACS(bytes.NewReader(in))
		if err != nil {
			if !errors.Is(err, flowsolver.ErrDIMACS) {
				t.Fatalf("error does not wrap ErrDIMACS: %v", err)
			}
			m := lineNumber.FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("error names no line: %v", err)
			}
			if line, _ := strconv.Atoi(m[1]); line < 1 || line > bytes.Count(in, []byte("\n"))+2 {
				t.Fatalf("error names line %d of an input of %d newlines: %v", line, bytes.Count(in, []byte("\n")), err)
			}
			return
		}
		checkDIMACSRoundTrip(t, g)
	})
}

// declaresMoreThan reports whether a problem line in the input declares
// more than limit nodes or arcs.
func declaresMoreThan(in []byte, limit int64) bool {
	for line := range bytes.Lines(in) {
		f := bytes.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' || r == '\r' || r == '\v' || r == '\f' || r == '\n' })
		if len(f) != 4 || string(f[0]) != "p" {
			continue
		}
		for _, count := range f[2:] {
			if v, err := strconv.ParseInt(string(count), 10, 64); err == nil && v > limit {
				return true
			}
		}
	}
	return false
}

// BenchmarkReadDIMACS reads a random instance of 100,000 nodes and 1,000,000
// arcs (about 24 MB); the figure in MB/s is the parse throughput.
func BenchmarkReadDIMACS(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const nodes, arcs = 100_000, 1_000_000
	g := flowsolver.NewGraph(nodes, arcs)
	for i := range nodes {
		s := int64(0)
		if i%10 == 0 {
			s = r.Int64N(2_000_000) - 1_000_000
		}
		dimacsAddNode(b, g, s)
	}
	for range arcs {
		up := r.Int64N(1_000_000)
		dimacsAddArc(b, g, flowsolver.NodeID(r.IntN(nodes)), flowsolver.NodeID(r.IntN(nodes)), r.Int64N(up/100+1), up, r.Int64N(20_000)-10_000)
	}
	var buf bytes.Buffer
	if err := flowsolver.WriteDIMACS(&buf, g); err != nil {
		b.Fatal(err)
	}
	in := buf.Bytes()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := flowsolver.ReadDIMACS(bytes.NewReader(in)); err != nil {
			b.Fatal(err)
		}
	}
}
