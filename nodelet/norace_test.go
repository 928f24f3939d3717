//go:build !race

package nodelet_test

const raceEnabled = false
