package fleet

import (
	"fmt"
	"syscall"
)

// clientFilesPerNode is how many descriptors a simulated node's client may
// hold: its target long-poll and its report request.
const clientFilesPerNode = 2

// serverFilesPerNode is how many the dispatcher serving a node may hold:
// the server ends of those two.
const serverFilesPerNode = 2

// fileSlack is what the rest of the process (the dispatcher's store, its
// peers, the load generator) may hold.
const fileSlack = 4096

// EnsureFiles makes sure this process may open the files it needs to
// serve served nodes (the dispatcher's ends of their connections) and to
// run simulated nodes in it (their ends), raising its limit when it can
// (the hard limit too, as root), and says what to do when it cannot: a
// fleet past its limit would not fail, it would stall with every
// connection refused and retried, and a server past it has its accepts
// fail (they wait and retry, api.KeepAccepting) while nodes stall.
func EnsureFiles(served, simulated int) error {
	need := uint64(served)*serverFilesPerNode + uint64(simulated)*clientFilesPerNode + fileSlack
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("fleet: read the open-files limit: %w", err)
	}
	if lim.Cur >= need {
		return nil
	}
	raised := syscall.Rlimit{Cur: need, Max: max(lim.Max, need)}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
		what := fmt.Sprintf("%d simulated nodes need", simulated)
		switch {
		case simulated == 0:
			what = fmt.Sprintf("serving %d nodes needs", served)
		case served > 0:
			what = fmt.Sprintf("serving %d nodes and simulating %d needs", served, simulated)
		}
		return fmt.Errorf("fleet: %s about %d open files and the limit is %d (hard %d), which this process could not raise (%v): raise it, e.g. ulimit -n %d",
			what, need, lim.Cur, lim.Max, err, need)
	}
	return nil
}
