// Package runtimetest is the conformance suite every runtime.Runtime must
// pass. A runtime's tests call Run with a Factory that builds a Harness per
// test: a way to open Runtime values over one fresh host (opening again
// stands for a nodelet restart), a way to express simple pod behaviours in
// the runtime's own specs, and the capabilities the runtime claims. Tests
// that need a capability a runtime lacks are skipped, saying so.
//
// # Invariants
//
//   - Every test removes what it started, and checks that a removed or
//     rejected pod leaves nothing behind (Harness.Leftovers).
//   - Timing assertions are loose (seconds), so the suite passes on a
//     loaded two-core machine.
package runtimetest
