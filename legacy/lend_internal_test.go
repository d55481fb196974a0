package legacy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestProcessLendsLines reads a child's stream with ReadBorrowed, as the
// bridge's fast path does: every line arrives whole and in order; a line
// lent stays as it was until the next read however far the reader gets
// ahead; long lines and noise are handled as before; and the blocks lines
// are copied to are used again, not made anew for each 64 KiB.
func TestProcessLendsLines(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Command{Path: os.Args[0], Env: []string{"LEGACY_TEST_CHILD=echo", "GORACE=atexit_sleep_ms=0"}}.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	const n = 20000
	var want []string
	for i := range n {
		size := 20 + i%150
		switch {
		case i%997 == 0:
			size = 3 * maxLentLine // copied, not lent
		case i%1999 == 0:
			size = lentBlockSize - 100 // longer than a lent line, nearly a block
		}
		want = append(want, fmt.Sprintf(`{"i":%d,"p":"%s"}`, i, strings.Repeat(string(rune('a'+i%26)), size)))
	}
	go func() {
		for i, line := range want {
			if i%5000 == 1 {
				p.Write(ctx, []byte("not JSON: noise the reader skips"))
			}
			if err := p.Write(ctx, []byte(line)); err != nil {
				return
			}
		}
	}()

	// The first line is read before lending starts: the caller's own.
	first, err := p.Read(ctx)
	if err != nil || string(first) != want[0] {
		t.Fatalf("first line: %q, %v", first, err)
	}
	lent := 0
	var prev, prevCopy []byte
	for i := 1; i < n; i++ {
		if i%1000 == 0 {
			time.Sleep(5 * time.Millisecond) // the reader runs ahead, through blocks
		}
		if prev != nil && !bytes.Equal(prev, prevCopy) {
			t.Fatalf("line %d changed before the next read: %.60q, was %.60q", i-1, prev, prevCopy)
		}
		frame, borrowed, err := p.ReadBorrowed(ctx)
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if string(frame) != want[i] {
			t.Fatalf("line %d: got %.60q…, want %.60q…", i, frame, want[i])
		}
		// (Lines the reader copied before the first ReadBorrowed are
		// the caller's own; every short one after is lent.)
		if long := len(frame) > maxLentLine; long && borrowed || !long && !borrowed && lent > 0 {
			t.Fatalf("line %d of %d bytes: borrowed %v", i, len(frame), borrowed)
		}
		if borrowed {
			lent++
			if cap(frame) != len(frame) {
				t.Fatalf("line %d: capacity %d past its %d bytes: an append would write over the next line", i, cap(frame), len(frame))
			}
		}
		prev, prevCopy = frame, bytes.Clone(frame)
	}
	p.lines.mu.Lock()
	made, started := p.lines.made, p.lines.seq
	p.lines.mu.Unlock()
	t.Logf("%d lines lent, in %d blocks filled, %d made", lent, started, made)
	if lent < n*9/10 || started < 20 {
		t.Fatalf("%d lines lent in %d blocks: the test lent too little to say", lent, started)
	}
	if made > spareBlocks+2 {
		t.Errorf("%d blocks made for %d filled: they are not used again", made, started)
	}
}
