//go:build !race

package tdjsonsim_test

const raceEnabled = false
