// Package seedtest gives randomized tests a seeded generator that logs its
// seed, so that any failure can be replayed exactly:
//
//	SLUICE_SEED=1234 go test ./flowsolver -run TestDifferential
//
// Without SLUICE_SEED the seed comes from the clock, so that every run
// explores new cases.
package seedtest
