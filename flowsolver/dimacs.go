package flowsolver

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// ErrDIMACS is wrapped by every error ReadDIMACS returns about its input.
var ErrDIMACS = errors.New("flowsolver: bad DIMACS input")

// Limits on a DIMACS file beyond those of a Graph. They are checked before
// anything is allocated for the declared sizes.
const (
	// MaxDIMACSArcs is the most arcs a problem line may declare.
	MaxDIMACSArcs = 1 << 28
	// MaxDIMACSLine is the longest line ReadDIMACS accepts, in bytes.
	MaxDIMACSLine = 1 << 24
)

// dimacsPrealloc caps the arcs ReadDIMACS reserves room for on the strength
// of the problem line alone; beyond it, memory grows with the arcs read.
const dimacsPrealloc = 1 << 22

// ReadDIMACS reads a min-cost flow problem in the DIMACS format:
//
//	c a comment
//	p min NODES ARCS
//	n ID SUPPLY
//	a SRC DST LOW CAP COST
//
// Node IDs in the file are 1..NODES; file node i becomes NodeID i-1, and the
// k-th arc line (from 0) becomes ArcID k, so the returned graph has no holes.
// A node without an n line has supply 0; a negative SUPPLY is a demand. LOW
// is the arc's lower bound and CAP its capacity. Blank lines are allowed
// and fields are separated by spaces or tabs (a line may end in CRLF).
//
// The input is checked strictly: exactly one p line, of type min, before any
// n or a line; at most one n line per node; exactly ARCS a lines; node IDs
// in 1..NODES; every number a decimal integer within the Graph's limits
// (MaxNodes, MaxCapacity, MaxAbsCost) and 0 <= LOW <= CAP; NODES at most
// MaxNodes, ARCS at most MaxDIMACSArcs and lines at most MaxDIMACSLine bytes.
// ReadDIMACS does not check that supplies balance: Solve reports that.
//
// An error about the input wraps ErrDIMACS (and ErrBadGraph when the Graph
// rejects a value: beyond its limits, or LOW outside 0..CAP) and names the
// line at fault: "flowsolver: bad DIMACS input: line 7: arc head 12 out of
// range 1..10". Problems found at end of input name the line after the last
// one, or the problem line for a wrong arc count. An error from r is
// returned wrapped, without ErrDIMACS.
//
// Memory is proportional to NODES plus the arcs actually read: on the
// problem line's word alone, room is reserved for at most 1<<22 arcs.
func ReadDIMACS(r io.Reader) (*Graph, error) {
	d := dimacsReader{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<18), MaxDIMACSLine)
	for sc.Scan() {
		d.line++
		if err := d.parseLine(sc.Bytes()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, dimacsErrorf(d.line+1, "longer than %d bytes", MaxDIMACSLine)
		}
		return nil, fmt.Errorf("read DIMACS: line %d: %w", d.line+1, err)
	}
	switch {
	case d.g == nil:
		return nil, dimacsErrorf(d.line+1, "end of input without a problem line (p min NODES ARCS)")
	case d.arcs != d.wantArcs:
		return nil, dimacsErrorf(d.pLine, "problem line declares %d arcs, the input has %d", d.wantArcs, d.arcs)
	}
	return d.g, nil
}

// maxFields is one more than the most fields a line may have, so that an
// extra field is noticed.
const maxFields = 7

// dimacsReader is ReadDIMACS's state between lines.
type dimacsReader struct {
	g     *Graph // nil until the problem line
	line  int    // number of the current line, from 1
	pLine int    // number of the problem line

	nodes, wantArcs, arcs int64
	// hasSupply is a bitset of the nodes that had an n line.
	hasSupply []uint64

	f [maxFields][]byte // the current line's fields
}

// parseLine parses one line, without its line terminator.
func (d *dimacsReader) parseLine(line []byte) error {
	i := 0
	for i < len(line) && isSpace(line[i]) {
		i++
	}
	if i == len(line) || line[i] == 'c' && (i+1 == len(line) || isSpace(line[i+1])) {
		return nil
	}
	n := splitFields(line[i:], &d.f)
	switch string(d.f[0]) {
	case "p":
		return d.problem(n)
	case "n":
		return d.node(n)
	case "a":
		return d.arc(n)
	default:
		return dimacsErrorf(d.line, "unknown line type %s (want c, p, n or a)", quote(d.f[0]))
	}
}

// problem parses "p min NODES ARCS" and builds the graph's nodes.
func (d *dimacsReader) problem(n int) error {
	if d.g != nil {
		return dimacsErrorf(d.line, "second problem line (the first is line %d)", d.pLine)
	}
	if n != 4 {
		return dimacsErrorf(d.line, "problem line has %d fields, want 4: p min NODES ARCS", n)
	}
	if string(d.f[1]) != "min" {
		return dimacsErrorf(d.line, "problem type %s, want min", quote(d.f[1]))
	}
	nodes, err := d.count("node count", d.f[2], MaxNodes)
	if err != nil {
		return err
	}
	arcs, err := d.count("arc count", d.f[3], MaxDIMACSArcs)
	if err != nil {
		return err
	}
	d.g = NewGraph(int(nodes), int(min(arcs, dimacsPrealloc)))
	for range nodes {
		if _, err := d.g.AddNode(0); err != nil {
			return dimacsWrap(d.line, "problem line", err)
		}
	}
	d.pLine, d.nodes, d.wantArcs = d.line, nodes, arcs
	return nil
}

// node parses "n ID SUPPLY".
func (d *dimacsReader) node(n int) error {
	if d.g == nil {
		return dimacsErrorf(d.line, "node line before the problem line")
	}
	if n != 3 {
		return dimacsErrorf(d.line, "node line has %d fields, want 3: n ID SUPPLY", n)
	}
	id, err := d.nodeID("node", d.f[1])
	if err != nil {
		return err
	}
	supply, err := d.int("node supply", d.f[2])
	if err != nil {
		return err
	}
	if d.hasSupply == nil {
		d.hasSupply = make([]uint64, (d.nodes+63)/64)
	}
	word, bit := id/64, uint64(1)<<(id%64)
	if d.hasSupply[word]&bit != 0 {
		return dimacsErrorf(d.line, "second node line for node %d", id+1)
	}
	d.hasSupply[word] |= bit
	if err := d.g.SetSupply(NodeID(id), supply); err != nil {
		return dimacsWrap(d.line, "node "+strconv.FormatInt(id+1, 10), err)
	}
	return nil
}

// arc parses "a SRC DST LOW CAP COST".
func (d *dimacsReader) arc(n int) error {
	if d.g == nil {
		return dimacsErrorf(d.line, "arc line before the problem line")
	}
	if n != 6 {
		return dimacsErrorf(d.line, "arc line has %d fields, want 6: a SRC DST LOW CAP COST", n)
	}
	if d.arcs == d.wantArcs {
		return dimacsErrorf(d.line, "more arcs than the %d declared on line %d", d.wantArcs, d.pLine)
	}
	tail, err := d.nodeID("arc tail", d.f[1])
	if err != nil {
		return err
	}
	head, err := d.nodeID("arc head", d.f[2])
	if err != nil {
		return err
	}
	lower, err := d.int("arc lower bound", d.f[3])
	if err != nil {
		return err
	}
	upper, err := d.int("arc capacity", d.f[4])
	if err != nil {
		return err
	}
	cost, err := d.int("arc cost", d.f[5])
	if err != nil {
		return err
	}
	if _, err := d.g.AddArc(NodeID(tail), NodeID(head), lower, upper, cost); err != nil {
		return dimacsWrap(d.line, fmt.Sprintf("arc %d->%d", tail+1, head+1), err)
	}
	d.arcs++
	return nil
}

// count parses a non-negative count of at most limit.
func (d *dimacsReader) count(what string, b []byte, limit int64) (int64, error) {
	v, err := d.int(what, b)
	switch {
	case err != nil:
		return 0, err
	case v < 0:
		return 0, dimacsErrorf(d.line, "%s %d is negative", what, v)
	case v > limit:
		return 0, dimacsErrorf(d.line, "%s %d beyond the limit of %d", what, v, limit)
	}
	return v, nil
}

// nodeID parses a file node ID in 1..nodes and returns it as a NodeID's
// value (one less).
func (d *dimacsReader) nodeID(what string, b []byte) (int64, error) {
	v, err := d.int(what, b)
	if err != nil {
		return 0, err
	}
	if v < 1 || v > d.nodes {
		return 0, dimacsErrorf(d.line, "%s %d out of range 1..%d", what, v, d.nodes)
	}
	return v - 1, nil
}

// int parses a field as an integer; what names it in the error.
func (d *dimacsReader) int(what string, b []byte) (int64, error) {
	v, err := parseInt(b)
	if err != nil {
		return 0, dimacsErrorf(d.line, "%s %s: %v", what, quote(b), err)
	}
	return v, nil
}

// dimacsErrorf returns an error wrapping ErrDIMACS about the given line.
func dimacsErrorf(line int, format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrDIMACS, line, fmt.Sprintf(format, args...))
}

// dimacsWrap wraps an error of the Graph (ErrBadGraph) with ErrDIMACS, the
// line and what was being added.
func dimacsWrap(line int, what string, err error) error {
	return fmt.Errorf("%w: line %d: %s: %w", ErrDIMACS, line, what, err)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f' }

// splitFields stores the first maxFields space-separated fields of line in
// f and returns the number of fields line has.
func splitFields(line []byte, f *[maxFields][]byte) int {
	n := 0
	for i := 0; ; {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			return n
		}
		j := i
		for j < len(line) && !isSpace(line[j]) {
			j++
		}
		if n < maxFields {
			f[n] = line[i:j]
		}
		n++
		i = j
	}
}

var (
	errNotInteger = errors.New("not an integer")
	errRange      = errors.New("out of the range of int64")
)

// parseInt parses a decimal integer with an optional sign, like
// strconv.ParseInt(string(b), 10, 64) without the conversion.
func parseInt(b []byte) (int64, error) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, errNotInteger
	}
	var u uint64
	for _, c := range b {
		c -= '0'
		if c > 9 {
			return 0, errNotInteger
		}
		if u > (1<<63)/10 {
			return 0, errRange
		}
		u = u*10 + uint64(c)
	}
	switch {
	case u > 1<<63 || u == 1<<63 && !neg:
		return 0, errRange
	case neg:
		return -int64(u), nil
	default:
		return int64(u), nil
	}
}

// quote quotes a field for an error message, cut short if it is long.
func quote(b []byte) string {
	const limit = 32
	if len(b) > limit {
		return strconv.Quote(string(b[:limit])) + "..."
	}
	return strconv.Quote(string(b))
}

// WriteDIMACS writes g in the format ReadDIMACS reads: the problem line, an
// n line for each node with a non-zero supply, and an a line for each arc,
// in ArcID order. Nodes are numbered 1..g.Nodes() in NodeID order over the
// nodes in use, skipping removed IDs; for a graph without removed nodes
// (such as one from ReadDIMACS) file node i is NodeID i-1. Reading the
// output back gives g with its IDs made dense.
func WriteDIMACS(w io.Writer, g *Graph) error {
	// A bufio.Writer keeps its first error and Flush returns it, so the
	// writes below are not checked one by one.
	bw := bufio.NewWriterSize(w, 1<<16)
	num := newNumbering(g)
	b := append(bw.AvailableBuffer(), "p min "...)
	b = strconv.AppendInt(b, int64(g.Nodes()), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(g.Arcs()), 10)
	bw.Write(append(b, '\n'))
	for n := range NodeID(g.NodeCap()) {
		if !g.HasNode(n) || g.Supply(n) == 0 {
			continue
		}
		b := append(bw.AvailableBuffer(), "n "...)
		b = strconv.AppendInt(b, num.of(n), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, g.Supply(n), 10)
		bw.Write(append(b, '\n'))
	}
	for a := range ArcID(g.ArcCap()) {
		if !g.HasArc(a) {
			continue
		}
		tail, head, lower, upper, cost := g.Arc(a)
		b := append(bw.AvailableBuffer(), "a "...)
		b = strconv.AppendInt(b, num.of(tail), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, num.of(head), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, lower, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, upper, 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, cost, 10)
		bw.Write(append(b, '\n'))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write DIMACS: %w", err)
	}
	return nil
}

// WriteFlows writes a solution's non-zero arc flows as DIMACS solution
// lines, "f SRC DST FLOW", in ArcID order, numbering nodes as WriteDIMACS
// does: for a graph read by ReadDIMACS, the file's node numbers (NodeID+1).
// It fails without writing if s has fewer flows than g has arc IDs.
func WriteFlows(w io.Writer, g *Graph, s *Solution) error {
	if s == nil || len(s.Flow) < g.ArcCap() {
		have := 0
		if s != nil {
			have = len(s.Flow)
		}
		return fmt.Errorf("write flows: %d flows for %d arc IDs", have, g.ArcCap())
	}
	bw := bufio.NewWriterSize(w, 1<<16) // errors: see WriteDIMACS
	num := newNumbering(g)
	for a := range ArcID(g.ArcCap()) {
		if !g.HasArc(a) || s.Flow[a] == 0 {
			continue
		}
		tail, head, _, _, _ := g.Arc(a)
		b := append(bw.AvailableBuffer(), "f "...)
		b = strconv.AppendInt(b, num.of(tail), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, num.of(head), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, s.Flow[a], 10)
		bw.Write(append(b, '\n'))
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write flows: %w", err)
	}
	return nil
}

// numbering maps NodeIDs to DIMACS node numbers: the nodes in use numbered
// 1..Nodes() in NodeID order. It is nil when no ID is unused, and a node's
// number is then its NodeID+1.
type numbering []int32

func newNumbering(g *Graph) numbering {
	if g.Nodes() == g.NodeCap() {
		return nil
	}
	num := make(numbering, g.NodeCap())
	next := int32(1)
	for n := range num {
		if g.HasNode(NodeID(n)) {
			num[n] = next
			next++
		}
	}
	return num
}

func (num numbering) of(n NodeID) int64 {
	if num == nil {
		return int64(n) + 1
	}
	return int64(num[n])
}
