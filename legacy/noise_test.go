//go:build unix

package legacy_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/legacy"
)

// Past NoiseLimit non-JSON lines in a row the child is broken: Read fails
// with a message naming the cause instead of skipping its log forever. A
// shorter run of noise between frames (2 lines, under the limit of 5)
// costs nothing, and every skipped line reaches OnNoise.
func TestProcessNoiseLimit(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	p, _ := startChild(t, "noisy", func(c *legacy.Command) {
		c.NoiseLimit = 5
		c.OnNoise = func(line []byte) {
			mu.Lock()
			seen = append(seen, string(line))
			mu.Unlock()
		}
	})
	expectFrame(t, p, `{"seq":1}`)
	expectFrame(t, p, `{"seq":2}`)
	_, err := readWithin(t, p, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "5 lines in a row that are not JSON-RPC") || !strings.Contains(err.Error(), "log to stderr") {
		t.Fatalf("Read after the noise = %v, want the agent reported broken", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 7 || seen[0] != "log: starting" {
		t.Errorf("OnNoise saw %q, want the 2 lines between the frames and the 5 after", seen)
	}
}

// Without a limit the same child is read past its noise for as long as it
// runs (the behaviour with the shim's stdout-noise rule off): a Read waits
// on through its log, skipping it, until its ctx ends, and the child is
// never reported broken.
func TestProcessNoNoiseLimit(t *testing.T) {
	p, _ := startChild(t, "noisy", nil)
	expectFrame(t, p, `{"seq":1}`)
	expectFrame(t, p, `{"seq":2}`)
	frame, err := readWithin(t, p, 300*time.Millisecond)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Read through the log = %q, %v; want it still waiting when its ctx ended", frame, err)
	}
	if p.Skipped() < 20 {
		t.Fatalf("only %d lines skipped in 300 ms of a log line a millisecond", p.Skipped())
	}
	if err := p.Close(); err != nil && !strings.Contains(err.Error(), "signal") {
		t.Logf("close: %v", err)
	}
}
