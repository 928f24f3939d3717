package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
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
	// RoleNodelet is a node's agent: it registers nodes, long-polls their
	// targets and reports their tasks.
	RoleNodelet
	// RoleAdmin may do everything.
	RoleAdmin
)

var roleNames = map[string]Role{"reader": RoleReader, "submitter": RoleSubmitter, "nodelet": RoleNodelet, "admin": RoleAdmin}

func (r Role) String() string {
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

// Tokens maps bearer tokens to principals. The zero value and nil hold no
// token. It is immutable once built and safe for concurrent use.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum [sha256.Size]byte
	p   Principal
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
//	TOKEN ROLE [QUEUE,...]
//
// where ROLE is admin, submitter, reader or nodelet, and the comma-separated
// queue list (submitters only) restricts a submitter to those queues.
// Blank lines and lines starting with # are ignored. Errors name the line.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{}
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
			return nil, fmt.Errorf("server: tokens: line %d: want TOKEN ROLE [QUEUE,...], got %d fields", n, len(f))
		}
		role, ok := roleNames[f[1]]
		if !ok {
			return nil, fmt.Errorf("server: tokens: line %d: unknown role %q (want admin, submitter, reader or nodelet)", n, f[1])
		}
		if prev, dup := seen[f[0]]; dup {
			return nil, fmt.Errorf("server: tokens: line %d: token repeats line %d's", n, prev)
		}
		seen[f[0]] = n
		p := Principal{Role: role}
		if len(f) == 3 {
			if role != RoleSubmitter {
				return nil, fmt.Errorf("server: tokens: line %d: only a submitter has queues, not a %s", n, role)
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
		t.entries = append(t.entries, tokenEntry{sum: sha256.Sum256([]byte(f[0])), p: p})
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
	return len(t.entries)
}

// Lookup returns the principal of token. It compares token with every
// known one in constant time (over their SHA-256 sums), so neither a
// match's position nor a token's length shows in its timing.
func (t *Tokens) Lookup(token string) (Principal, bool) {
	if t == nil {
		return Principal{}, false
	}
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	return t.entries[found].p, true
}
