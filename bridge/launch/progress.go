package launch

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// Progress shows a person which step a command that makes them wait is on
// (demo, check, doctor): one status line on a terminal, rewritten in place
// and erased before anything else is printed. It is for terminals only:
// NewProgress returns nil when the stream is not one, so that a pipe or a
// log file gets no progress noise, and every method of a nil *Progress does
// nothing.
type Progress struct {
	mu    sync.Mutex
	w     io.Writer
	shown bool
}

// NewProgress returns a Progress on f when f is a terminal, else nil.
func NewProgress(f *os.File) *Progress {
	if f == nil || !isTerminal(f) || os.Getenv("TERM") == "dumb" {
		return nil
	}
	return NewProgressTo(f)
}

// NewProgressTo returns a Progress that writes to w whatever w is (tests,
// or a caller that decided for itself).
func NewProgressTo(w io.Writer) *Progress { return &Progress{w: w} }

// Step shows the current step, replacing the one shown before.
func (p *Progress) Step(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// \r and "erase line": the status line is rewritten in place.
	fmt.Fprintf(p.w, "\r\x1b[K… "+format, args...)
	p.shown = true
}

// Clear erases the status line, if one is shown: call it before printing
// anything else on the same terminal.
func (p *Progress) Clear() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		io.WriteString(p.w, "\r\x1b[K")
		p.shown = false
	}
}

// IsTerminal reports whether f is a terminal (a person typing, rather than
// an editor's pipe).
func IsTerminal(f *os.File) bool { return f != nil && isTerminal(f) }
