package store

import (
	"bytes"
	"io"
)

// A turn interrupted: the process that held a session stopped (kill -9, a
// crash, the machine) in the middle of one of its turns. Its lock file is
// still there, with its pid (a holder that lets go removes it), and the
// transcript's last turn has a prompt and no stop: the records the writer
// had not handed to the OS yet, updates the editor may have been sent,
// are lost. The next process to take the session (Acquire) marks the spot
// with a gap record {"interrupted":true,"cause":"..."}; nothing else can
// say what is missing there. (Where there are no lock files, an open turn
// alone is taken for one: a bridge ends its turns before it lets a
// session go.)

// interruptedCause is the cause an interrupted turn's gap record gives.
const interruptedCause = "the acp-bridge process that recorded this session stopped during this turn (killed or crashed): updates the editor was sent after the last record here may be missing"

// turnHeads are how the lines that open or close a turn start.
var (
	promptHead = []byte(`{"t":"prompt"`)
	stopHead   = []byte(`{"t":"stop"`)
	gapHead    = []byte(`{"t":"gap"`)
)

// interrupted reports whether the transcript f (size bytes) ends inside a
// turn: its last prompt has no stop after it, nor the gap record of an
// earlier Acquire. It reads the file backwards from its end, a block at a
// time, as far as the last turn's prompt (usually one block): only the
// first bytes of each line matter. A torn last line (no newline) is not a
// record.
func interrupted(f io.ReaderAt, size int64) bool {
	const block = 64 << 10
	buf := make([]byte, block)
	var head [512]byte
	// lineHead returns the first bytes of the line [from, to).
	lineHead := func(b []byte, start, from, to int64) []byte {
		n := min(int64(len(head)), to-from)
		if from-start+n <= int64(len(b)) {
			return b[from-start : from-start+n]
		}
		h := head[:n]
		if _, err := f.ReadAt(h, from); err != nil && err != io.EOF {
			return nil
		}
		return h
	}
	// verdict says what the line [from, to) tells, if anything.
	verdict := func(h []byte) (open, known bool) {
		switch {
		case bytes.HasPrefix(h, promptHead):
			return true, true
		case bytes.HasPrefix(h, stopHead):
			return false, true
		case bytes.HasPrefix(h, gapHead) && bytes.Contains(h, []byte(`"interrupted":true`)):
			return false, true
		}
		return false, false
	}
	end := int64(-1) // the newline ending the line being looked for
	for pos := size; pos > 0; {
		start := max(pos-block, 0)
		b := buf[:pos-start]
		if _, err := f.ReadAt(b, start); err != nil && err != io.EOF {
			return false
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] != '\n' {
				continue
			}
			p := start + int64(i)
			if end >= 0 {
				if open, known := verdict(lineHead(b, start, p+1, end)); known {
					return open
				}
			}
			// (The bytes after the last newline are a torn line, not a
			// record.)
			end = p
		}
		pos = start
	}
	if end < 0 {
		return false
	}
	h := head[:min(int64(len(head)), end)]
	if _, err := f.ReadAt(h, 0); err != nil && err != io.EOF {
		return false
	}
	open, _ := verdict(h)
	return open
}
