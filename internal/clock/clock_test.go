package clock

import (
	"os"
	"testing"
	"time"
)

// Now is the system's time moved by Ahead, and FileTime moves a system
// stamp by the same: checked by order alone, so a slow machine cannot fail
// it. CI runs it with the calendar a year ahead too.
func TestNowAndFileTimeShareTheCalendar(t *testing.T) {
	before := time.Now()
	now := Now()
	after := time.Now()
	if now.Before(before.Add(Ahead())) || now.After(after.Add(Ahead())) {
		t.Errorf("Now = %v, not between %v and %v moved by %v", now, before, after, Ahead())
	}
	stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := FileTime(stamp); !got.Equal(stamp.Add(Ahead())) {
		t.Errorf("FileTime(%v) = %v, want it moved by %v", stamp, got, Ahead())
	}
}

// CI's year-ahead run says which shift it linked in: a -X flag that names
// no variable is silently ignored, and the run would test today instead.
func TestAheadIsWhatTheBuildAskedFor(t *testing.T) {
	want := os.Getenv("ACP_CLOCK_WANT_AHEAD")
	if want == "" {
		want = "0s"
	}
	d, err := time.ParseDuration(want)
	if err != nil {
		t.Fatalf("ACP_CLOCK_WANT_AHEAD=%q: %v", want, err)
	}
	if Ahead() != d {
		t.Errorf("the calendar is moved by %v, the build asked for %v", Ahead(), d)
	}
}
