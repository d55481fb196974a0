//go:build race

package store

// raceEnabled: the race detector makes reading every byte ten times
// slower; the tests that read tens of megabytes read fewer.
const raceEnabled = true
