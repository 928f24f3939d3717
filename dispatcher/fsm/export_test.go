package fsm

import (
	"testing"
	"time"
)

// Dump is dump, for black-box tests.
func Dump(f *FSM) string { return f.dump() }

// BenchNodes is benchNodes, for black-box benchmarks.
func BenchNodes(b *testing.B, nodes int) (*FSM, func([]byte, error), time.Time) {
	return benchNodes(b, nodes)
}

// RoundView and KeptInput are roundView and keptInput, for the black-box
// test that gives them.
type (
	RoundView = roundView
	KeptInput = keptInput
)

// RunRandomCommands and RunPortsProperty are runRandomCommands and
// runPortsProperty, for black-box tests.
func RunRandomCommands(t *testing.T, v RoundView) { runRandomCommands(t, v) }

func RunPortsProperty(t *testing.T, v RoundView) { runPortsProperty(t, v) }
