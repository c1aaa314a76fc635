//go:build !race

package jsonmodel_test

// raceEnabled: see race_on_test.go.
const raceEnabled = false
