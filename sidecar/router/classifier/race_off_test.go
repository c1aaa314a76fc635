//go:build !race

package classifier

// raceEnabled: see race_on_test.go.
const raceEnabled = false
