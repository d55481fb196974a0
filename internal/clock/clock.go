// Package clock is the calendar that session data is dated by.
//
// Everything the bridge writes with a date (a transcript's records, a
// session's listing data) and every rule that compares such a date with the
// present (retention's maximum age, the expiry of a deleted session's
// tombstone) reads the time here, and so does every test that makes dated
// data. A build can then move that whole calendar, the tests' data with it:
//
//	go test -ldflags "-X github.com/acp-bridge/acp-bridge/internal/clock.ahead=8760h" ./...
//
// runs the code and its tests a year in the future, which is how CI finds
// test data with a fixed date that a rule compares with the present. No
// release build sets it; without it Now is time.Now.
package clock

import (
	"sync"
	"time"
)

// ahead is a duration in time.ParseDuration's syntax, set only by the
// linker's -X flag.
var ahead string

// Ahead is how far this build's calendar is moved ahead of the system's:
// zero unless the build set it. A value that does not parse counts as zero.
var Ahead = sync.OnceValue(func() time.Duration {
	d, _ := time.ParseDuration(ahead)
	return d
})

// Now is the present on this build's calendar.
func Now() time.Time { return time.Now().Add(Ahead()) }

// FileTime is a time the system stamped (a file's modification time) on
// this build's calendar, so that it compares with Now.
func FileTime(t time.Time) time.Time { return t.Add(Ahead()) }
