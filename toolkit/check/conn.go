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
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
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
	// Send writes one message; a stdio connection adds the "\n".
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
// The agent runs in a process group of its own and is stopped the way the
// bridge stops its agents (legacy.Process): stdin closed, then SIGTERM to
// the whole group, then SIGKILL after StopGrace; so a wrapper script's
// helper that outlives stdin's end cannot keep a run waiting, and a
// wrapper's own cleanup gets its chance to run.
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

const (
	defaultStopGrace = 2 * time.Second
	// stdinExitWait is how long Close waits for the agent to exit on its
	// own once its stdin is closed, before signalling its group.
	stdinExitWait = 250 * time.Millisecond
	// reapWait bounds the wait for the kernel to report a SIGKILLed agent.
	reapWait = time.Second
)

// Dial starts the agent.
func (c Command) Dial(ctx context.Context) (Conn, error) {
	if len(c.Args) == 0 {
		return nil, errors.New("no agent command")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cmd := exec.Command(c.Args[0], c.Args[1:]...)
	cmd.Env = append(os.Environ(), c.Env...)
	if c.TraceDir != "" {
		cmd.Env = append(cmd.Env, bridgeTraceEnv(c.TraceDir, scenarioOf(ctx)))
	}
	cmd.Dir = c.Dir
	setProcessGroup(cmd)
	// The pipes are *os.File, which the child inherits directly: exec
	// starts no copying goroutine, so Wait cannot block on a grandchild
	// that holds stdout or stderr open. WaitDelay caps it anyway.
	cmd.WaitDelay = time.Second
	var files []*os.File
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	fail := func(err error) (Conn, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, fmt.Errorf("starting the agent %q: %w", c.Args[0], err)
	}
	inR, inW, err := pipe()
	if err != nil {
		return fail(err)
	}
	outR, outW, err := pipe()
	if err != nil {
		return fail(err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return fail(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	// The child has its own copies; ours would keep the pipes open.
	inR.Close()
	outW.Close()
	errW.Close()
	p := &procConn{cmd: cmd, grace: c.StopGrace, stdin: inW, stdout: outR, stderrR: errR,
		out: bufio.NewReaderSize(outR, 1<<16), exited: make(chan struct{})}
	if p.grace <= 0 {
		p.grace = defaultStopGrace
	}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	go func() { _, _ = io.Copy(&p.stderr, errR) }()
	return p, nil
}

type procConn struct {
	cmd     *exec.Cmd
	grace   time.Duration
	stdin   *os.File
	stdout  *os.File
	stderrR *os.File
	out     *bufio.Reader
	stderr  tailBuffer
	exited  chan struct{}
	waitErr error
	once    sync.Once
}

func (p *procConn) Send(msg []byte) error {
	_, err := p.stdin.Write(append(bytes.Clone(msg), '\n'))
	return err
}

func (p *procConn) Recv() ([]byte, error) {
	line, err := p.out.ReadBytes('\n')
	if len(line) > 0 {
		return bytes.TrimSuffix(line, []byte("\n")), nil
	}
	if errors.Is(err, os.ErrClosed) {
		err = io.EOF
	}
	return nil, err
}

// Close stops the agent in stages, as the bridge stops its own: stdin
// closed; SIGTERM to the process group if the agent is still running
// after a moment; SIGKILL to the group after the grace. Whatever the agent
// left behind in its group is killed, and the pipes are closed, so Close
// returns within about grace+1.5 s whatever the agent and its children do.
func (p *procConn) Close() error {
	p.once.Do(func() {
		p.stdin.Close()
		if !p.waitExit(stdinExitWait) {
			_ = terminateGroup(p.cmd.Process)
			if !p.waitExit(p.grace) {
				_ = killGroup(p.cmd.Process)
				p.waitExit(reapWait)
			}
		}
		// The agent has gone; what is left of its group is ours to end.
		_ = killGroup(p.cmd.Process)
		p.stdout.Close()
		p.stderrR.Close()
	})
	return nil
}

func (p *procConn) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

func (p *procConn) Diagnostics() string {
	var b strings.Builder
	select {
	case <-p.exited:
		fmt.Fprintf(&b, "agent exited: %v\n", exitText(p.waitErr))
	default:
	}
	if s := p.stderr.String(); s != "" {
		fmt.Fprintf(&b, "agent stderr (tail):\n%s", s)
	}
	return b.String()
}

func exitText(err error) string {
	if err == nil {
		return "status 0"
	}
	return err.Error()
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 4096 {
		t.buf = t.buf[len(t.buf)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// URL dials a WebSocket ACP agent: one JSON-RPC message per text frame
// (acp-spec.md §15.4).
type URL struct {
	URL    string
	Header http.Header
}

func (u URL) String() string { return u.URL }

// Dial connects.
func (u URL) Dial(ctx context.Context) (Conn, error) {
	c, _, err := websocket.DefaultDialer.DialContext(ctx, u.URL, u.Header)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", u.URL, err)
	}
	return &wsConn{c: c}, nil
}

type wsConn struct {
	c    *websocket.Conn
	wmu  sync.Mutex
	once sync.Once

	mu  sync.Mutex
	err error // why the reader stopped
}

func (w *wsConn) Send(msg []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return w.c.WriteMessage(websocket.TextMessage, msg)
}

func (w *wsConn) Recv() ([]byte, error) {
	for {
		typ, msg, err := w.c.ReadMessage()
		if err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return nil, io.EOF
		}
		if typ == websocket.TextMessage {
			return msg, nil
		}
	}
}

func (w *wsConn) Close() error {
	w.once.Do(func() {
		w.wmu.Lock()
		_ = w.c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		w.wmu.Unlock()
		w.c.Close()
	})
	return nil
}

func (w *wsConn) Diagnostics() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return "connection ended: " + w.err.Error() + "\n"
	}
	return ""
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
