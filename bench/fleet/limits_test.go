package fleet

import (
	"strings"
	"syscall"
	"testing"
)

// TestEnsureFiles raises a low open-files limit to what a fleet needs, and
// refuses, naming the fix, a fleet no limit can hold.
func TestEnsureFiles(t *testing.T) {
	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig) })
	if orig.Max < 2*fileSlack {
		t.Skipf("hard open-files limit %d too low to test with", orig.Max)
	}
	low := syscall.Rlimit{Cur: 64, Max: orig.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	nodes := int((orig.Max - fileSlack) / filesPerNode)
	if err := ensureFiles(nodes); err != nil {
		t.Fatalf("ensureFiles(%d) under a low soft limit: %v", nodes, err)
	}
	var now syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &now); err != nil {
		t.Fatal(err)
	}
	if want := uint64(nodes)*filesPerNode + fileSlack; now.Cur < want {
		t.Fatalf("limit %d after ensureFiles, want at least %d", now.Cur, want)
	}
	err := ensureFiles(1 << 40)
	if err == nil || !strings.Contains(err.Error(), "ulimit -n") {
		t.Fatalf("ensureFiles of an impossible fleet: %v, want an error naming ulimit -n", err)
	}
}
