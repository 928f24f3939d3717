package server

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/sluicehq/sluice/api"
)

// Role is what a token may do.
type Role uint8

// Roles of a token.
const (
	// RoleReader reads everything: jobs, tasks, nodes, logs, the watch
	// stream.
	RoleReader Role = iota + 1
	// RoleSubmitter submits, reads and cancels jobs of its queues (every
	// queue when its token lists none), and reads their tasks' logs.
	RoleSubmitter
	// RoleNodelet is one node's agent: it registers its node, long-polls
	// its target and reports its tasks, and nothing of any other node.
	RoleNodelet
	// RoleAdmin may do everything.
	RoleAdmin
	// RoleJob is an appmaster job's token (a job token, see JobKeys),
	// which its pods get: it reads its own job, its tasks and its part of
	// the watch stream, leases and releases its capboxes, starts and
	// stops tasks in them, and cancels its job; nothing else, and nothing
	// once its job has ended. No token file names it.
	RoleJob
)

var roleNames = map[string]Role{"reader": RoleReader, "submitter": RoleSubmitter, "nodelet": RoleNodelet, "admin": RoleAdmin}

func (r Role) String() string {
	if r == RoleJob {
		return "job"
	}
	for n, v := range roleNames {
		if v == r {
			return n
		}
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// Principal is who a request acts as.
type Principal struct {
	Role Role
	// Queues restricts a submitter to these queues; empty means any.
	Queues []string
	// Node is the node a nodelet acts for; every nodelet has one.
	Node string
	// Job is the appmaster job a job token acts for.
	Job string
}

// mayNode reports whether p may act for node name: a nodelet for its own
// node only, an admin for any (the other roles are refused by route).
func (p Principal) mayNode(name string) bool {
	return p.Role != RoleNodelet || p.Node == name
}

// mayQueue reports whether p may see and act on jobs of queue q.
func (p Principal) mayQueue(q string) bool {
	if p.Role != RoleSubmitter || len(p.Queues) == 0 {
		return true
	}
	return slices.Contains(p.Queues, q)
}

// scoped reports whether p sees only some queues' jobs.
func (p Principal) scoped() bool { return p.Role == RoleSubmitter && len(p.Queues) > 0 }

// mayWatch reports whether p sees j in the watch stream: a job token its
// own job and that job's capbox sets, the others what mayQueue allows.
func (p Principal) mayWatch(id, appmaster, queue string) bool {
	if p.Role == RoleJob {
		return id == p.Job || appmaster == p.Job
	}
	return p.mayQueue(queue)
}

// Tokens maps bearer tokens to principals. The zero value and nil hold no
// token. It is immutable once built and safe for concurrent use.
//
// Tokens are kept by their SHA-256 sums, never in the clear, and looked up
// by sum: the time a lookup takes can show something of the sum of what
// was presented, which says nothing useful of a token, so a cluster of
// ten thousand node tokens costs a map lookup a request, not a scan.
type Tokens struct {
	bySum map[[sha256.Size]byte]Principal
}

// LoadTokens reads a token file (see ParseTokens).
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("server: tokens: %w", err)
	}
	defer f.Close()
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// ParseTokens reads a token file: one token per line as
//
//	TOKEN admin
//	TOKEN reader
//	TOKEN submitter [QUEUE,...]
//	TOKEN nodelet NODE
//
// A submitter's comma-separated queue list restricts it to those queues. A
// nodelet token is its node's credential: it acts for node NODE alone, so
// each node has a token of its own and no two tokens name one node. Blank
// lines and lines starting with # are ignored. Errors name the line.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{bySum: map[[sha256.Size]byte]Principal{}}
	nodes := map[string]int{}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("server: tokens: line %d: want TOKEN ROLE [QUEUE,...] or TOKEN nodelet NODE, got %d fields", n, len(f))
		}
		role, ok := roleNames[f[1]]
		if !ok {
			return nil, fmt.Errorf("server: tokens: line %d: unknown role %q (want admin, submitter, reader or nodelet)", n, f[1])
		}
		if strings.HasPrefix(f[0], JobTokenPrefix) {
			return nil, fmt.Errorf("server: tokens: line %d: a token may not start with %q, which job tokens start with", n, JobTokenPrefix)
		}
		if prev, dup := seen[f[0]]; dup {
			return nil, fmt.Errorf("server: tokens: line %d: token repeats line %d's", n, prev)
		}
		seen[f[0]] = n
		p := Principal{Role: role}
		switch {
		case role == RoleNodelet:
			if len(f) != 3 {
				return nil, fmt.Errorf("server: tokens: line %d: a nodelet token names its node: TOKEN nodelet NODE", n)
			}
			if err := api.CheckName(f[2]); err != nil {
				return nil, fmt.Errorf("server: tokens: line %d: node name %q: %w", n, f[2], err)
			}
			if prev, dup := nodes[f[2]]; dup {
				return nil, fmt.Errorf("server: tokens: line %d: node %s already has line %d's token", n, f[2], prev)
			}
			nodes[f[2]] = n
			p.Node = f[2]
		case len(f) == 3:
			if role != RoleSubmitter {
				return nil, fmt.Errorf("server: tokens: line %d: only a submitter has queues and a nodelet a node, not a %s", n, role)
			}
			for q := range strings.SplitSeq(f[2], ",") {
				if q == "" {
					return nil, fmt.Errorf("server: tokens: line %d: empty queue name in %q", n, f[2])
				}
				if !slices.Contains(p.Queues, q) {
					p.Queues = append(p.Queues, q)
				}
			}
		}
		t.bySum[sha256.Sum256([]byte(f[0]))] = p
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("server: tokens: %w", err)
	}
	return t, nil
}

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.bySum)
}

// Lookup returns the principal of token, found by its SHA-256 sum (see
// Tokens).
func (t *Tokens) Lookup(token string) (Principal, bool) {
	if t == nil {
		return Principal{}, false
	}
	p, ok := t.bySum[sha256.Sum256([]byte(token))]
	return p, ok
}
