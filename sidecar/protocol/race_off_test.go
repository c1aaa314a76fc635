//go:build !race

package protocol

// raceEnabled: see race_on_test.go.
const raceEnabled = false
