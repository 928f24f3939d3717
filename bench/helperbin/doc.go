// Package helperbin finds the helper binaries the benchmarks run as
// processes of their own (bin/etcdload, bin/benchplot), kept out of the
// sluice binary because every container's init re-executes it and pays
// for all of its packages' initialization.
//
// Invariant: Find returns only a path it was given, or a regular
// executable file (beside the running executable first, then on PATH).
//
// Usage:
//
//	plotter, ok := helperbin.Find("benchplot", flagValue)
package helperbin
