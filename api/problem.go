package api

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Errors callers act on.
var (
	// ErrInvalid is wrapped by every *ValidationError: the request is
	// malformed or breaks a rule, and nothing of it was accepted.
	ErrInvalid = errors.New("api: invalid request")
	// ErrTooLarge is wrapped when a request is over MaxBodyBytes or
	// MaxItemsPerRequest.
	ErrTooLarge = errors.New("api: request too large")
)

// Problem is one thing wrong with a request.
type Problem struct {
	// Item is the index of the item (job, capbox request) the problem is in,
	// or -1 when it concerns the request as a whole.
	Item int `json:"item"`
	// Path locates the offending value, such as
	// "jobs[3].tasks[0].pod.containers[1].resources.memory".
	Path string `json:"path,omitempty"`
	// Message says what is wrong with it.
	Message string `json:"message"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// ValidationError lists everything wrong with a request. It wraps ErrInvalid.
type ValidationError struct {
	// Problems are the first MaxProblems problems, in the order of the input.
	Problems []Problem `json:"problems"`
	// Total counts every problem found, listed or not.
	Total int `json:"total"`
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	if e.Total == 1 {
		b.WriteString("invalid request: ")
	} else {
		fmt.Fprintf(&b, "invalid request, %d problems: ", e.Total)
	}
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	if n := e.Total - len(e.Problems); n > 0 {
		fmt.Fprintf(&b, "; and %d more", n)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// segKind says what a path segment is.
type segKind uint8

const (
	segName  segKind = iota // a field name known as a string
	segRange                // a field name as a range of the input, rendered on demand
	segIndex                // an array index
	segKey                  // a map key, rendered quoted in brackets
)

// seg is one step of a path. Building a path costs no allocation: names are
// constants or ranges of the input, turned into text only for a problem.
type seg struct {
	kind       segKind
	start, end int32
	index      int32
	name       string
}

// checker collects problems at a path into a request's item. The decoder and
// the validator share it, so both name a value the same way.
type checker struct {
	input []byte
	path  []seg
	item  int
	probs []Problem
	total int
	// itemStart is where the current item's problems begin in probs.
	itemStart int
	// keys is sortedKeys' buffer.
	keys []string
}

func (c *checker) push(name string) { c.path = append(c.path, seg{kind: segName, name: name}) }
func (c *checker) pushIndex(i int)  { c.path = append(c.path, seg{kind: segIndex, index: int32(i)}) }
func (c *checker) pushKey(k string) { c.path = append(c.path, seg{kind: segKey, name: k}) }
func (c *checker) pop()             { c.path = c.path[:len(c.path)-1] }

func (c *checker) pathString() string {
	var b strings.Builder
	for i, s := range c.path {
		switch s.kind {
		case segIndex:
			if s.index >= 0 {
				b.WriteByte('[')
				b.WriteString(strconv.Itoa(int(s.index)))
				b.WriteByte(']')
			}
		case segKey:
			b.WriteByte('[')
			b.WriteString(strconv.Quote(s.name))
			b.WriteByte(']')
		default:
			name := s.name
			if s.kind == segRange {
				if s.index == 0 {
					continue
				}
				name = string(c.input[s.start:s.end])
			}
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(name)
		}
	}
	return b.String()
}

// add records a problem at the current path.
func (c *checker) add(msg string) {
	c.total++
	if len(c.probs) < MaxProblems {
		c.probs = append(c.probs, Problem{Item: c.item, Path: c.pathString(), Message: msg})
	}
}

func (c *checker) addf(format string, args ...any) { c.add(fmt.Sprintf(format, args...)) }

// covered reports whether the current path is, or is inside, a path that
// already has a problem in the current item. The validator skips such values:
// a value the decoder could not read is not reported twice.
func (c *checker) covered() bool {
	if c.itemStart >= len(c.probs) {
		return false
	}
	p := c.pathString()
	for _, q := range c.probs[c.itemStart:] {
		if p == q.Path || strings.HasPrefix(p, q.Path) && len(p) > len(q.Path) && (p[len(q.Path)] == '.' || p[len(q.Path)] == '[') {
			return true
		}
	}
	return false
}

func (c *checker) err() error {
	if c.total == 0 {
		return nil
	}
	return &ValidationError{Problems: c.probs, Total: c.total}
}
