package check

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acp-bridge/acp-bridge/legacy"
)

// A Dialer opens a fresh connection to the agent under test. check dials
// once per scenario, so that one scenario's damage cannot fail the next.
type Dialer interface {
	Dial(ctx context.Context) (Conn, error)
	// String describes the agent for reports.
	String() string
}

// Conn is one connection to an agent: raw messages both ways.
type Conn interface {
	// Send writes one message; a stdio connection adds the "\n". It is
	// called from one goroutine at a time.
	Send(msg []byte) error
	// Recv returns the next message (a line on stdio, a text frame on a
	// WebSocket) without its line ending; io.EOF when the agent is gone.
	Recv() ([]byte, error)
	// Close ends the connection and, for a process, the process.
	Close() error
	// Diagnostics returns what the agent said on the side (the tail of a
	// child's stderr, its exit status), for failure reports.
	Diagnostics() string
}

// Command starts args as a child agent per connection, with env added to
// this process's environment and dir as its working directory.
//
// The agent runs as the bridge runs its own (legacy.Process): in a process
// group of its own, stopped with stdin closed, then SIGTERM to the whole
// group, then SIGKILL after StopGrace; so a wrapper script's helper that
// outlives stdin's end cannot keep a run waiting, and a wrapper's own
// cleanup gets its chance to run.
type Command struct {
	Args []string
	Env  []string
	Dir  string
	// StopGrace is how long Close waits between SIGTERM and SIGKILL; 0
	// means 2 s.
	StopGrace time.Duration
	// TraceDir, when set, names the trace of an acp-bridge under test
	// after the scenario it serves (see EnvTrace).
	TraceDir string
}

func (c Command) String() string { return strings.Join(c.Args, " ") }

// Dial starts the agent.
func (c Command) Dial(ctx context.Context) (Conn, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("no agent command")
	}
	env := c.Env
	if c.TraceDir != "" {
		// The acp-bridge under test opens its trace there as it starts,
		// and exits when it cannot: the directory must exist first.
		if err := os.MkdirAll(c.TraceDir, 0o700); err != nil {
			return nil, fmt.Errorf("making the trace directory: %w", err)
		}
		env = append(slices.Clip(env), bridgeTraceEnv(c.TraceDir, scenarioOf(ctx)))
	}
	pc := &procConn{}
	p, err := legacy.Command{
		Path: c.Args[0], Args: c.Args[1:], Env: env, Dir: c.Dir, StopGrace: c.StopGrace,
		OnNoise: pc.noisy, OnStderr: pc.stderr.add,
	}.Start(ctx)
	if err != nil {
		return nil, err
	}
	pc.p = p
	p.OnIdle(pc.idle)
	return pc, nil
}

// procConn is a Conn on a legacy.Process. The process hands Read only the
// lines of stdout that are JSON, and the rest to OnNoise; check judges the
// rest too (stdout-purity), so Recv returns every line, in order: a line
// skipped before a frame comes before it, and one skipped while the agent
// goes quiet ends the Read under way (OnIdle), so that it is not held back
// until the agent's next frame.
type procConn struct {
	p      *legacy.Process
	stderr tailBuffer

	// Recv's, and the hooks the process calls from Read:
	noise  [][]byte           // lines skipped and not yet returned
	frame  []byte             // a frame read after them, not yet returned
	cancel context.CancelFunc // ends the Read under way
}

func (c *procConn) Send(msg []byte) error { return c.p.Write(context.Background(), msg) }

func (c *procConn) Recv() ([]byte, error) {
	for len(c.noise) == 0 && c.frame == nil {
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		frame, err := c.p.Read(ctx)
		cancel()
		if err != nil && len(c.noise) == 0 {
			return nil, io.EOF // Diagnostics says how
		}
		c.frame = frame
	}
	if len(c.noise) > 0 {
		line := c.noise[0]
		c.noise = c.noise[1:]
		return line, nil
	}
	frame := c.frame
	c.frame = nil
	return frame, nil
}

func (c *procConn) noisy(line []byte) { c.noise = append(c.noise, bytes.Clone(line)) }

func (c *procConn) idle() {
	if len(c.noise) > 0 {
		c.cancel()
	}
}

func (c *procConn) Close() error { return c.p.Close() }

func (c *procConn) Diagnostics() string {
	var b strings.Builder
	if ps := c.p.ProcessState(); ps != nil {
		fmt.Fprintf(&b, "agent exited: %v\n", ps)
	}
	if s := c.stderr.String(); s != "" {
		fmt.Fprintf(&b, "agent stderr (tail):\n%s", s)
	}
	return b.String()
}

// tailBuffer keeps the last 4 KiB of the lines added to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) add(line []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(append(t.buf, line...), '\n')
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// URL dials a WebSocket ACP agent: one JSON-RPC message per text frame
// (ACP's remote transport RFD), on the bridge's own client (legacy.WebSocket).
type URL struct {
	URL    string
	Header http.Header
}

func (u URL) String() string { return u.URL }

// Dial connects, within ctx's deadline.
func (u URL) Dial(ctx context.Context) (Conn, error) {
	ws := legacy.WebSocket{
		URL: u.URL, Header: u.Header,
		// check bounds each wait on the agent itself (Options.Timeout):
		// a keepalive would add a failure of its own to the verdicts.
		PingPeriod: -1,
	}
	if deadline, ok := ctx.Deadline(); ok {
		ws.DialTimeout = time.Until(deadline)
	}
	c, err := ws.Dial(ctx)
	if err != nil {
		return nil, err
	}
	return &wsConn{c: c}, nil
}

// wsConn is a Conn on a legacy.WSConn.
type wsConn struct {
	c *legacy.WSConn

	mu  sync.Mutex
	err error // why Read stopped
}

func (w *wsConn) Send(msg []byte) error { return w.c.Write(context.Background(), msg) }

func (w *wsConn) Recv() ([]byte, error) {
	msg, err := w.c.Read(context.Background())
	if err != nil {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
		return nil, io.EOF
	}
	return msg, nil
}

func (w *wsConn) Close() error { return w.c.Close() }

func (w *wsConn) Diagnostics() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil || errors.Is(w.err, legacy.ErrClosed) { // (closed by check)
		return ""
	}
	return "connection ended: " + w.err.Error() + "\n"
}

// Pipe is a Dialer for in-process agents (tests): serve runs one agent
// connection on the given reader and writer until the reader ends.
type Pipe struct {
	Name  string
	Serve func(in io.Reader, out io.Writer) error
}

func (p Pipe) String() string { return p.Name }

// Dial starts serve on a pair of pipes.
func (p Pipe) Dial(ctx context.Context) (Conn, error) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	c := &pipeConn{in: inW, out: bufio.NewReaderSize(outR, 1<<16), done: make(chan struct{})}
	go func() {
		c.err = p.Serve(inR, outW)
		outW.Close()
		inR.Close()
		close(c.done)
	}()
	return c, nil
}

type pipeConn struct {
	in   *io.PipeWriter
	out  *bufio.Reader
	done chan struct{}
	err  error
	once sync.Once
}

func (c *pipeConn) Send(msg []byte) error {
	_, err := c.in.Write(append(bytes.Clone(msg), '\n'))
	return err
}

func (c *pipeConn) Recv() ([]byte, error) {
	line, err := c.out.ReadBytes('\n')
	if len(line) > 0 {
		return bytes.TrimSuffix(line, []byte("\n")), nil
	}
	return nil, err
}

func (c *pipeConn) Close() error {
	c.once.Do(func() {
		c.in.Close()
		<-c.done // the peer's reader drains the agent's output until EOF
	})
	return nil
}

func (c *pipeConn) Diagnostics() string {
	select {
	case <-c.done:
		if c.err == nil {
			return "agent ended\n"
		}
		return fmt.Sprintf("agent ended: %v\n", c.err)
	default:
		return ""
	}
}
