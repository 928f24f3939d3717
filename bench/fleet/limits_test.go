package fleet

import (
	"strings"
	"syscall"
	"testing"
)

// TestEnsureFiles raises a low open-files limit to what a fleet (its
// clients' ends), a server (the servers' ends) or both need, and refuses,
// naming the fix, what no limit can hold.
func TestEnsureFiles(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	if orig.Max < 2*fileSlack {
		t.Skipf("hard open-files limit %d too low to test with", orig.Max)
	}
	nodes := int((orig.Max - fileSlack) / (clientFilesPerNode + serverFilesPerNode))
	for _, tc := range []struct {
		name            string
		served, clients int
		want            uint64
	}{
		{"fleet", 0, nodes, uint64(nodes)*clientFilesPerNode + fileSlack},
		{"server", nodes, 0, uint64(nodes)*serverFilesPerNode + fileSlack},
		{"both", nodes, nodes, uint64(nodes)*(clientFilesPerNode+serverFilesPerNode) + fileSlack},
	} {
		low := syscall.Rlimit{Cur: 64, Max: orig.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
			t.Fatal(err)
		}
		if err := EnsureFiles(tc.served, tc.clients); err != nil {
			t.Fatalf("%s: EnsureFiles(%d, %d) under a low soft limit: %v", tc.name, tc.served, tc.clients, err)
		}
		var now syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
			t.Fatal(err)
		}
		if now.Cur < tc.want {
			t.Fatalf("%s: limit %d after EnsureFiles, want at least %d", tc.name, now.Cur, tc.want)
		}
	}
	for _, tc := range []struct {
		served, clients int
		want            string
	}{
		{0, 1 << 40, "1099511627776 simulated nodes need"},
		{1 << 40, 0, "serving 1099511627776 nodes needs"},
		{1 << 40, 1 << 40, "serving 1099511627776 nodes and simulating 1099511627776 needs"},
	} {
		err := EnsureFiles(tc.served, tc.clients)
		if err == nil || !strings.Contains(err.Error(), "ulimit -n") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("EnsureFiles(%d, %d): %v, want an error saying %q and naming ulimit -n", tc.served, tc.clients, err, tc.want)
		}
	}
}
