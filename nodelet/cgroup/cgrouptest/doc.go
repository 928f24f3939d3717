// Package cgrouptest helps tests that need real cgroups: a Manager on a
// unique root that is removed from every hierarchy when the test ends, and
// child processes (a re-executed test binary that spins, or any command)
// placed in pod cgroups and killed when the test ends.
//
// Invariants: everything it creates lives under a root named
// /sluice-test-<pid>-<random>, never under the production root, and is
// removed from every hierarchy by t.Cleanup even when the test fails;
// processes it starts are killed and reaped before the cgroups are removed.
// It is for tests only: production code never imports it.
package cgrouptest
