//go:build race

package classifier

// raceEnabled: the tests run under the race detector, about ten times
// slower; the differential tests then take a sample of the dev messages
// (the whole set runs without it).
const raceEnabled = true
