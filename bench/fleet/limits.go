package fleet

import (
	"fmt"
	"syscall"
)

// filesPerNode is how many descriptors a simulated node may hold: its
// target long-poll and its report request, and their server ends when the
// dispatcher runs in the same process.
const filesPerNode = 4

// serverFilesPerNode is how many of those are the dispatcher's ends.
const serverFilesPerNode = 2

// fileSlack is what the rest of the process (the dispatcher's store, its
// peers, the load generator) may hold.
const fileSlack = 4096

// ensureFiles makes sure the process may open enough files for nodes
// nodes, raising its limit when it can (the hard limit too, as root),
// and says what to do when it cannot: a fleet past its limit would not
// fail, it would stall with every connection refused and retried.
func ensureFiles(nodes int) error { return ensureNoFile(nodes, filesPerNode) }

// EnsureServerFiles is ensureFiles for a process that serves nodes nodes
// of fleets in other processes: it holds the dispatcher's ends of their
// connections. Past its limit the servers' accepts fail (they wait and
// retry, api.KeepAccepting) and nodes stall; the error says so.
func EnsureServerFiles(nodes int) error { return ensureNoFile(nodes, serverFilesPerNode) }

func ensureNoFile(nodes, perNode int) error {
	need := uint64(nodes)*uint64(perNode) + fileSlack
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("fleet: read the open-files limit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	raised := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		return fmt.Errorf("fleet: %d nodes need about %d open files and the limit is %d (hard %d), which this process could not raise (%v): raise it, e.g. ulimit -n %d",
			nodes, need, lim.Cur, lim.Max, err, need)
	}
	return nil
}
