//go:build race

package jsonmodel_test

// raceEnabled: the tests run under the race detector, where sync.Pool drops
// about a quarter of what is put back (on purpose, to find reuse bugs).
const raceEnabled = true
