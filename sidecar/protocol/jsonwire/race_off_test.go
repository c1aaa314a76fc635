//go:build !race

package jsonwire

// raceEnabled: see race_on_test.go.
const raceEnabled = false
