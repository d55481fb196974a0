//go:build race

package tests

// raceEnabled makes TestMain build the bridge with -race when the tests
// themselves run with -race, so data races in the engine fail end-to-end runs.
const raceEnabled = true
