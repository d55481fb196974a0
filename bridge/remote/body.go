// Reading a POST's body within the message limit and the shared budget
// of bytes buffered across connections, which a reader waits for rather
// than exceed.

package remote

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"
)

// MaxInitialize bounds the body of a POST without Acp-Connection-Id, which
// must be an initialize (it opens a connection), in bytes; MaxMessage when
// that is smaller.
const MaxInitialize = 1 << 20

var (
	errReadingFull = errors.New("the server is reading as many message bytes as it may at once")
	errConnFull    = errors.New("the connection is sending as many message bytes as it may at once")
)

// readBody reads r's body, at most limit bytes, within the bytes the server
// reads at once (MaxReading) and, for a message to c (nil for initialize),
// the bytes c sends at once (MaxMessage). When it cannot, it answers the
// request itself and ok is false; else release gives the bytes back once
// the body has been handed on.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, c *conn, limit int64) (body []byte, release func(), ok bool) {
	if r.ContentLength > limit {
		s.tooLarge(w, r, limit)
		return nil, nil, false
	}
	br := &budgetReader{r: http.MaxBytesReader(w, r.Body, limit)}
	br.budgets = append(br.budgets, budgetOf{&s.reading, s.maxReading(), errReadingFull})
	if c != nil {
		br.budgets = append(br.budgets, budgetOf{&c.reading, s.maxMessage(), errConnFull})
	}
	var buf bytes.Buffer
	var err error
	if r.ContentLength > 0 {
		// Reserved whole before a byte is read, and read into one buffer
		// of its size.
		err = br.take(r.ContentLength)
		if err == nil {
			buf.Grow(int(r.ContentLength) + bytes.MinRead)
		}
	}
	if err == nil {
		// Shutdown ends a read in progress: a slow body holds it up no more.
		rc := http.NewResponseController(w)
		aborted := make(chan struct{})
		stop := context.AfterFunc(s.lifetime(), func() {
			_ = rc.SetReadDeadline(time.Now())
			close(aborted)
		})
		_, err = buf.ReadFrom(br)
		if !stop() {
			<-aborted
			if err != nil {
				err = errShuttingDown
			}
		}
	}
	if err == nil {
		return buf.Bytes(), br.giveBack, true
	}
	br.giveBack()
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		s.tooLarge(w, r, tooBig.Limit)
	case errors.Is(err, errReadingFull):
		w.Header().Set("Retry-After", "1")
		s.log().Warn("refused a message: the server is reading as many bytes as it may at once", "limit", s.maxReading(), "remote", r.RemoteAddr)
		refuse(w, http.StatusServiceUnavailable, "serve is reading %d bytes of other messages at once, its limit (twice --max-message, at least 16 MiB); try again shortly", s.maxReading())
	case errors.Is(err, errConnFull):
		w.Header().Set("Retry-After", "1")
		refuse(w, http.StatusServiceUnavailable, "this connection is sending more than %d bytes of messages at once (serve's --max-message): send them one after the other", s.maxMessage())
	case errors.Is(err, errShuttingDown):
		refuse(w, http.StatusServiceUnavailable, "the server is shutting down")
	default:
		refuse(w, http.StatusBadRequest, "reading the message: %v", err)
	}
	return nil, nil, false
}

func (s *Server) tooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	s.log().Warn("refused an oversized message", "limit", limit, "remote", r.RemoteAddr)
	if r.Header.Get(HeaderConnectionID) == "" && limit < s.maxMessage() {
		refuse(w, http.StatusRequestEntityTooLarge, "a POST without %s must be initialize, and is at most %d bytes: send other messages with the %s initialize answered", HeaderConnectionID, limit, HeaderConnectionID)
		return
	}
	refuse(w, http.StatusRequestEntityTooLarge, "the message is larger than the limit of %d bytes (serve's --max-message)", limit)
}

// budget counts bytes in use against a limit.
type budget struct {
	mu    sync.Mutex
	used  int64
	freed chan struct{} // closed and replaced when bytes are given back
}

// wait takes n, waiting until it is free, or returns false once done is.
func (b *budget) wait(done <-chan struct{}, n, limit int64) bool {
	for {
		b.mu.Lock()
		if b.used+n <= limit {
			b.used += n
			b.mu.Unlock()
			return true
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-done:
			return false
		}
	}
}

func (b *budget) take(n, limit int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > limit {
		return false
	}
	b.used += n
	return true
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

type budgetOf struct {
	b     *budget
	limit int64
	full  error
}

// budgetReader takes what it reads from its budgets, up front (take) or as
// it reads (a body of unknown length); a read beyond one fails with its
// error.
type budgetReader struct {
	r       io.Reader
	budgets []budgetOf
	taken   int64
	read    int64
}

func (br *budgetReader) take(n int64) error {
	for i, b := range br.budgets {
		if !b.b.take(n, b.limit) {
			for _, t := range br.budgets[:i] {
				t.b.give(n)
			}
			return b.full
		}
	}
	br.taken += n
	return nil
}

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	br.read += int64(n)
	if br.read > br.taken {
		if terr := br.take(br.read - br.taken); terr != nil {
			return 0, terr
		}
	}
	return n, err
}

func (br *budgetReader) giveBack() {
	for _, b := range br.budgets {
		b.b.give(br.taken)
	}
	br.taken = 0
}
