package legacy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func startTestChild(t *testing.T, mode string) *Process {
	t.Helper()
	p, err := Command{Path: os.Args[0], Env: []string{"LEGACY_TEST_CHILD=" + mode, "GORACE=atexit_sleep_ms=0"}}.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestProcessReadsLines reads a child's stream as the bridge does: every
// line arrives whole and in order, however the pipe cut it, and stays as
// it was however far the pump reads ahead and whatever is read after it,
// with no room past its end; lines longer than a chunk and noise are
// handled on the way; and a stream of short lines is carved from blocks
// rather than allocated a line at a time.
func TestProcessReadsLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	p := startTestChild(t, "echo")

	const n = 20000
	var want []string
	for i := range n {
		size := 20 + i%150
		switch {
		case i < n/2 && i%997 == 0:
			size = 3 * accMax // joined in pieces: the caller's own
		case i < n/2 && i%1999 == 0:
			size = accMax - 100 // across chunks, joined in the splitter's buffer
		}
		want = append(want, fmt.Sprintf(`{"i":%d,"p":"%s"}`, i, strings.Repeat(string(rune('a'+i%26)), size)))
	}
	frames := make([][]byte, n) // (written as they are: a conversion per line would be garbage of the test's own)
	for i, line := range want {
		frames[i] = []byte(line)
	}
	go func() {
		for i, frame := range frames {
			if i%5000 == 1 {
				p.Write(ctx, []byte("not JSON: noise the reader skips"))
			}
			if err := p.Write(ctx, frame); err != nil {
				return
			}
		}
	}()

	got := make([][]byte, n) // (kept, to check at the end that none changed)
	var before, after runtime.MemStats
	for i := range n {
		if i%1000 == 0 {
			time.Sleep(5 * time.Millisecond) // the pump reads ahead, through its buffers
		}
		if i == n/2 {
			runtime.ReadMemStats(&before)
		}
		frame, err := p.Read(ctx)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if string(frame) != want[i] {
			t.Fatalf("line %d: got %.60q…, want %.60q…", i, frame, want[i])
		}
		if cap(frame) != len(frame) {
			t.Fatalf("line %d: capacity %d past its %d bytes: an append would write over the next line", i, cap(frame), len(frame))
		}
		got[i] = frame
	}
	runtime.ReadMemStats(&after)
	for i, frame := range got {
		if string(frame) != want[i] {
			t.Fatalf("line %d changed after later reads: %.60q…, want %.60q…", i, frame, want[i])
		}
	}
	lines := n - n/2
	if perLine := float64(after.Mallocs-before.Mallocs) / float64(lines); perLine > 0.1 {
		t.Errorf("reading %d short lines made %.2f allocations a line, want one per block of lines", lines, perLine)
	}
}

// TestProcessCancelledReadKeepsTheLine cancels Reads while a line is half
// in the pipe: each ends with its ctx's error, and nothing read is lost,
// so the next Read returns the whole line. A ctx done before Read is
// called changes nothing either.
func TestProcessCancelledReadKeepsTheLine(t *testing.T) {
	ctx := t.Context()
	p := startTestChild(t, "script")
	for round := range 3 {
		if err := p.Write(ctx, []byte(fmt.Sprintf(`half:{"round":%d,`, round))); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		frame, err := p.Read(short)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("round %d: Read of half a line = %q, %v; want it cut short by its ctx", round, frame, err)
		}
		done, cancel := context.WithCancel(ctx)
		cancel()
		if frame, err := p.Read(done); !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: Read with a ctx done = %q, %v", round, frame, err)
		}
		if err := p.Write(ctx, []byte(`rest:"whole":true}`)); err != nil {
			t.Fatal(err)
		}
		frame, err = p.Read(ctx)
		if want := fmt.Sprintf(`{"round":%d,"whole":true}`, round); err != nil || string(frame) != want {
			t.Fatalf("round %d: Read after the cancelled ones = %q, %v; want %s", round, frame, err, want)
		}
	}
}
