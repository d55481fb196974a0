package legacy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/pipesize"
	"github.com/acp-bridge/acp-bridge/internal/wire/ndjson"
	"github.com/acp-bridge/acp-bridge/internal/wire/slab"
	"github.com/hashicorp/go-hclog"
)

const (
	defaultStopGrace = 2 * time.Second
	// stdinExitWait is how long Close waits for the agent to exit on its own
	// after its stdin is closed, before signalling it.
	stdinExitWait = 250 * time.Millisecond
	// exitNoticeWait is how long Read waits, after stdout closed, for the
	// child to exit so that its error can carry the exit status; and, after
	// the child exited, for stdout to reach EOF (a grandchild may hold it
	// open forever).
	exitNoticeWait = 500 * time.Millisecond
	// pipeDrainWait is how long Close lets the pipe readers reach EOF (so the
	// agent's last stderr lines are logged) before closing the pipes.
	pipeDrainWait = 100 * time.Millisecond
	// stderrTailWait is how long Read's final error waits, after the exit,
	// for stderr to reach EOF, so that it carries the agent's last words
	// (they may still be in the pipe); a grandchild holding stderr open
	// must not delay the error for longer.
	stderrTailWait = 100 * time.Millisecond
	// maxTailLines, maxTailLine and maxTailBytes bound the stderr lines
	// kept for Read's final error: enough for "error: GEMINI_API_KEY not
	// set" and some context, not a stack trace, and not one long line in
	// place of the rest.
	maxTailLines = 5
	maxTailLine  = 256
	maxTailBytes = 1 << 10
	// reapWait bounds Close's wait for the kernel to report a SIGKILLed child.
	reapWait = time.Second
	// killReserve is what CloseBy keeps, before its deadline, for the
	// SIGKILL, the reaping and the pipes' drain (pipeDrainWait): a killed
	// child is reaped within milliseconds.
	killReserve = 300 * time.Millisecond
	// waitDelay is exec.Cmd.WaitDelay; see Start.
	waitDelay = time.Second
	// maxStderrLine is the longest stderr line logged whole; longer lines
	// are logged by their head.
	maxStderrLine = 16 << 10
	// childPipeBytes is the capacity the child's stdout pipe is given
	// (Linux's default is 64 KiB). A new bridge's first turn runs slower
	// than its later ones (fresh memory to touch, cold caches), and with
	// 64 KiB an agent faster than that stalled on a full pipe and had to
	// be woken again: a first turn of 200,000 updates took 173 ms instead
	// of 201 (medians of 15 interleaved runs; the naive relay's 178) and
	// 4% less of the bridge's CPU. Later turns are unchanged.
	childPipeBytes = 256 << 10
	// maxQuoted is how much of a skipped stdout line a log entry quotes.
	maxQuoted = 200
)

// Command configures an agent run as a child process that speaks
// newline-delimited JSON on stdin and stdout (ACP's stdio transport,
// and most legacy agents, docs/agent-protocols.md#lines-and-ids). The zero
// value of each field other than Path means the default given in its comment.
type Command struct {
	// Path is the program to run; a name without a slash is looked up in
	// PATH.
	Path string
	// Args are the arguments after the program name.
	Args []string
	// Env holds extra "KEY=value" entries appended to the bridge's own
	// environment (a later entry wins). Values are never logged.
	Env []string
	// Dir is the child's working directory; "" means the bridge's.
	Dir string
	// StopGrace is how long Close waits between SIGTERM and SIGKILL; 0 means
	// 2 s.
	StopGrace time.Duration
	// MaxLine is the longest stdout line accepted as a frame, in bytes; 0
	// means 64 MiB. Longer lines are logged, counted and skipped.
	MaxLine int
	// Logger receives the process's logs and, line by line at Info level,
	// the child's stderr; nil means no logging.
	Logger hclog.Logger
	// NoiseLimit, when positive, is how many non-JSON stdout lines in a row
	// the child may write before it is treated as broken: its stdout is
	// no longer read and Read fails naming the cause, so the editor gets
	// an error instead of a bridge spinning on a log (the compliance
	// shim's stdout-noise rule). 0 means no limit.
	NoiseLimit int
	// OnNoise, if not nil, is called from Read with every non-JSON line
	// skipped (valid only during the call).
	OnNoise func(line []byte)
	// OnStderr, if not nil, is called with every line of the child's
	// stderr as it is logged (the head of an over-long one), from the
	// goroutine reading stderr (valid only during the call): for a caller
	// that reports what the agent said, as acp-bridge check does.
	OnStderr func(line []byte)
}

// Process is a running agent child process, made by Command.Start. It has the
// methods of bridge.Link (see the package documentation).
//
// The child runs in a process group of its own (on Unix) so that Close stops
// whatever it started as well. Three goroutines serve it: one reads
// stdout ahead of Read (see pumpStdout), one logs stderr, one waits for
// the exit. Close stops them all and reaps the child.
type Process struct {
	cmd       *exec.Cmd // the child: cmd.Process
	log       hclog.Logger
	stopGrace time.Duration
	idle      func() // see OnIdle (Read's goroutine)

	stdin  *os.File // our write end of the child's stdin
	stdout *os.File // our read end of the child's stdout
	stderr *os.File // our read end of the child's stderr

	// The child's stdout: the pump reads it into chunks, Read cuts them
	// into lines (see stdout.go).
	chunks     chan chunk    // from the pump; capacity pumpBuffers
	free       chan []byte   // chunks' buffers, back to the pump; capacity pumpBuffers
	out        stdoutLines   // Read's
	own        slab.Slab     // Read's: where Read copies the lines it returns
	stdoutDone chan struct{} // closed when the pump stops
	stdoutErr  error         // Read's: why stdout ended, nil at EOF
	stderrDone chan struct{} // closed when the stderr logger stops
	stderrTail stderrTail    // the child's last stderr lines
	onStderr   func([]byte)  // Command.OnStderr
	exited     chan struct{} // closed once the child is reaped; the two below set first
	exitState  *os.ProcessState
	waitErr    error // from exec.Cmd.Wait

	closed    chan struct{} // closed by Close
	isClosed  atomic.Bool   // closed is, for Read's check of every line
	closeOnce sync.Once

	mu      sync.Mutex
	readErr error // Read's final error, once decided
	// final says readErr is set: Read checks it for every frame, without
	// the lock.
	final atomic.Bool

	skipped atomic.Int64

	// Owned by the goroutine writing: Writes run one at a time.
	wbuf      []byte          // a small frame and its newline, for one system call
	watchDone <-chan struct{} // Done of the ctx whose cancel interrupts writes
	stopWatch func() bool
}

// Start starts the agent. ctx bounds only the start itself: it is checked
// before the child is started, and cancelling it later does not touch the
// child. exec.CommandContext is deliberately not used, because its kill on
// cancellation would skip the staged stop that Close performs.
func (c Command) Start(ctx context.Context) (*Process, error) {
	if c.Path == "" {
		return nil, errors.New("agent process: no program to run")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("agent command %q not started: %w", c.Path, err)
	}
	log := orNull(c.Logger)
	if c.Dir != "" {
		// With SysProcAttr set (setProcessGroup), os.StartProcess skips its
		// own check, and a missing Dir would read as a missing program
		// ("fork/exec /bin/agent: no such file or directory").
		fi, err := os.Stat(c.Dir)
		if err == nil && !fi.IsDir() {
			err = syscall.ENOTDIR
		}
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, startError(c.Path, &fs.PathError{Op: "chdir", Path: c.Dir, Err: err})
		}
	}

	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = c.Dir
	setProcessGroup(cmd)
	// The pipes are *os.File, which the child inherits directly, so exec
	// starts no copying goroutines and Wait cannot hang on a grandchild that
	// keeps a pipe open. WaitDelay caps that wait anyway, in case the pipes
	// ever become plain io.Readers and Writers.
	cmd.WaitDelay = waitDelay

	inW, outR, errR, err := startPiped(cmd)
	if err != nil {
		return nil, startError(c.Path, err)
	}

	p := &Process{
		cmd:        cmd,
		log:        log,
		stopGrace:  c.StopGrace,
		stdin:      inW,
		stdout:     outR,
		stderr:     errR,
		chunks:     make(chan chunk, pumpBuffers),
		free:       make(chan []byte, pumpBuffers),
		out:        stdoutLines{split: lineSplitter{max: c.MaxLine}, noiseLimit: c.NoiseLimit, onNoise: c.OnNoise},
		stdoutDone: make(chan struct{}),
		stderrDone: make(chan struct{}),
		onStderr:   c.OnStderr,
		exited:     make(chan struct{}),
		closed:     make(chan struct{}),
	}
	if p.stopGrace <= 0 {
		p.stopGrace = defaultStopGrace
	}
	if p.out.split.max <= 0 {
		p.out.split.max = ndjson.DefaultMax
	}
	log.Info("agent process started", "path", c.Path, "pid", cmd.Process.Pid, "dir", c.Dir)
	log.Debug("agent process arguments", "args", c.Args, "env_added", envNames(c.Env))
	go p.wait()
	go p.pumpStdout()
	go p.logStderr()
	return p, nil
}

// startPiped starts cmd with its stdin, stdout and stderr pipes, and
// returns the bridge's ends of its pipes.
func startPiped(cmd *exec.Cmd) (inW, outR, errR *os.File, err error) {
	var files []*os.File // every pipe end, closed on failure
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	fail := func(err error) (*os.File, *os.File, *os.File, error) {
		for _, f := range files {
			f.Close()
		}
		return nil, nil, nil, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return fail(err)
	}
	outR, outW, err := pipe()
	if err != nil {
		return fail(err)
	}
	pipesize.Grow(outR, childPipeBytes)
	errR, errW, err := pipe()
	if err != nil {
		return fail(err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	// The child holds its own copies of these ends; ours would keep the
	// pipes open (stdout would never reach EOF).
	inR.Close()
	outW.Close()
	errW.Close()
	return inW, outR, errR, nil
}

// Pid returns the child's process id (also its process group id on Unix).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// ProcessState reports how the child ended, as exec.Cmd.ProcessState does
// once Wait has returned, or nil while it runs.
func (p *Process) ProcessState() *os.ProcessState {
	select {
	case <-p.exited:
		return p.exitState
	default:
		return nil
	}
}

// Skipped reports how many stdout lines were skipped so far: lines that are
// not a JSON object or array, and lines over MaxLine.
func (p *Process) Skipped() int64 { return p.skipped.Load() }

// Read returns the next JSON line from the child's stdout, without its line
// terminator (see the package documentation for the contract). Once the
// child is gone it returns an error saying how it ended, followed by its
// last stderr lines, if any, which usually say why:
//
//	agent process exited with status 3: error: GEMINI_API_KEY not set
//	agent process was killed by signal 9 (killed)
//	agent process closed its stdout
//
// The last is for a stdout that ended while the child did not exit within
// 500 ms. Stderr lines are trimmed and joined with " | "; at most the last
// five, 1 KiB in all, are kept.
func (p *Process) Read(ctx context.Context) ([]byte, error) {
	line, borrowed, err := p.ReadBorrowed(ctx)
	if borrowed {
		line = p.own.Copy(line)
	}
	return line, err
}

// ReadBorrowed is Read for a caller that is done with most lines before
// it reads again: when borrowed is true the line lies in Read's buffer and
// is valid only until the next Read or ReadBorrowed, and the caller copies
// what it keeps. A stream the caller passes on at once then costs no copy
// and no allocation per line.
func (p *Process) ReadBorrowed(ctx context.Context) (line []byte, borrowed bool, err error) {
	if p.isClosed.Load() || p.final.Load() { // (finalErr, for every line: two loads)
		if err := p.finalErr(); err != nil {
			return nil, false, err
		}
	}
	return p.nextLine(ctx)
}

// OnIdle sets f to be called, on Read's goroutine, whenever Read is about
// to wait for the agent: every frame read before has been returned (see
// WSConn.OnIdle). Call it before the first Read, from the goroutine that
// reads.
func (p *Process) OnIdle(f func()) { p.idle = f }

// afterStdout decides Read's error once stdout has ended: the exit status if
// the child exits soon, else that it closed its stdout.
func (p *Process) afterStdout(ctx context.Context) error {
	t := time.NewTimer(exitNoticeWait)
	defer t.Stop()
	select {
	case <-p.exited:
		return p.setFinal(p.exitError())
	case <-t.C:
		msg := "agent process closed its stdout"
		if p.stdoutErr != nil {
			msg = "agent process stdout: " + p.stdoutErr.Error()
		}
		// The child runs on, so stderr is not waited for: what it has
		// said so far is all there is.
		return p.setFinal(&linkError{msg: p.stderrTail.appendTo(msg), err: p.stdoutErr})
	case <-p.closed:
		return closedError("agent process")
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *Process) finalErr() error {
	if p.isClosed.Load() {
		return closedError("agent process")
	}
	if !p.final.Load() {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readErr
}

func (p *Process) setFinal(err error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.readErr == nil {
		p.readErr = err
		p.final.Store(err != nil)
	}
	return p.readErr
}

// Write writes frame and a newline to the child's stdin. It must be called
// from one goroutine at a time. Cancelling ctx interrupts a write blocked on
// a child that does not read; the link is unusable afterwards, since part
// of a line may have been written.
//
// A frame up to writeCopyMax goes out with its newline in one system call,
// copied into a buffer kept for the purpose (appending the newline to frame
// could scribble on the caller's backing array); a larger one in two, since
// the child reads a stream, not packets. The watch on ctx is set up once
// and serves every later Write with the same ctx, as the bridge writes
// with one ctx for the link's life: registering and unregistering it on
// every frame cost more than the write.
func (p *Process) Write(ctx context.Context, frame []byte) error {
	select {
	case <-p.closed:
		return closedError("agent process")
	default:
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if done := ctx.Done(); done != nil && done != p.watchDone {
		if p.stopWatch != nil {
			p.stopWatch()
		}
		p.watchDone = done
		p.stopWatch = context.AfterFunc(ctx, func() { p.stdin.SetWriteDeadline(aLongTimeAgo) })
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	var err error
	switch {
	case len(frame) <= writeCopyMax:
		p.wbuf = append(append(p.wbuf[:0], frame...), '\n')
		_, err = p.stdin.Write(p.wbuf)
	default:
		_, err = p.stdin.Write(frame)
		if err == nil {
			_, err = p.stdin.Write([]byte{'\n'})
		}
	}
	if err != nil {
		select {
		case <-p.closed:
			return closedError("agent process")
		default:
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &linkError{msg: "agent process stdin: " + err.Error(), err: err}
	}
	return nil
}

// writeCopyMax is the largest frame Write copies to add its newline.
const writeCopyMax = 64 << 10

// Close stops the child in stages, from polite to forceful, reaps it, and
// stops the goroutines serving it. It returns within about StopGrace+0.5 s,
// unblocks a pending Read, and is safe to call more than once.
func (p *Process) Close() error {
	p.closeOnce.Do(func() { p.stop(stdinExitWait, p.stopGrace) })
	return nil
}

// CloseBy is Close fitted to a deadline (the bridge's exit, promised
// within 3 s of the end of its input): the wait for the child to exit at
// its stdin's end and the grace between SIGTERM and SIGKILL are cut so
// that the child is killed, reaped and its pipes drained by then, whatever
// StopGrace says. Like Close, it is safe to call more than once.
func (p *Process) CloseBy(deadline time.Time) error {
	p.closeOnce.Do(func() {
		left := max(time.Until(deadline)-killReserve, 0)
		stdin := min(stdinExitWait, left/4)
		p.stop(stdin, min(p.stopGrace, left-stdin))
	})
	return nil
}

// stop is the staged shutdown, after the MCP go-sdk's CommandTransport:
// stdin closed, stdinWait for the child to exit by itself, SIGTERM, grace,
// SIGKILL.
func (p *Process) stop(stdinWait, grace time.Duration) {
	// Read and Write fail from now on; the pump stops.
	p.isClosed.Store(true)
	close(p.closed)
	// 1. Close stdin: an agent reading NDJSON exits at EOF by itself.
	p.stdin.Close()
	if !p.waitExit(stdinWait) {
		// 2. Ask the whole process group to terminate.
		p.log.Debug("agent process still running after stdin closed; sending SIGTERM", "pid", p.Pid())
		if err := terminateGroup(p.cmd.Process); err != nil {
			p.log.Warn("cannot send SIGTERM to the agent process group", "pid", p.Pid(), "error", err)
		}
		if !p.waitExit(grace) {
			// 3. Force it.
			p.log.Warn("agent process ignored SIGTERM; sending SIGKILL", "pid", p.Pid(), "grace", grace)
			if err := killGroup(p.cmd.Process); err != nil {
				p.log.Warn("cannot send SIGKILL to the agent process group", "pid", p.Pid(), "error", err)
			}
			if !p.waitExit(reapWait) {
				p.log.Error("agent process did not die after SIGKILL", "pid", p.Pid())
			}
		}
	}
	// 4. Kill what the agent left behind in its group (a grandchild that
	// outlived it); once the agent has gone, the rest of its group is ours.
	if err := killGroup(p.cmd.Process); err != nil {
		p.log.Debug("cannot signal the agent process group", "pid", p.Pid(), "error", err)
	}
	// 5. Let the pipe readers reach EOF so the agent's last stderr lines are
	// logged, then close the pipes, which ends the readers even if some
	// process outside the group still holds the other ends.
	p.waitPipes(pipeDrainWait)
	p.stdout.Close()
	p.stderr.Close()
	<-p.stdoutDone
	<-p.stderrDone
	for { // the chunks read ahead are of no more use
		select {
		case <-p.chunks:
		default:
			return
		}
	}
}

// waitExit reports whether the child is reaped within d.
func (p *Process) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

func (p *Process) waitPipes(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, done := range []chan struct{}{p.stdoutDone, p.stderrDone} {
		select {
		case <-done:
		case <-t.C:
			return
		}
	}
}

// wait reaps the child, so that it never lingers as a zombie, and records
// how it ended.
func (p *Process) wait() {
	p.waitErr = p.cmd.Wait()
	p.exitState = p.cmd.ProcessState
	p.log.Info("agent process ended", "pid", p.Pid(), "status", p.exitText())
	close(p.exited)
}

// exitText says how the child ended. Called after exited is closed.
func (p *Process) exitText() string {
	if p.exitState == nil {
		return "agent process: wait: " + p.waitErr.Error()
	}
	return exitText(p.exitState)
}

// exitError is Read's final error once the child has exited: how it ended
// and its last stderr lines. Called from Read after exited is closed.
func (p *Process) exitError() error {
	select {
	case <-p.stderrDone:
	default:
		t := time.NewTimer(stderrTailWait)
		select {
		case <-p.stderrDone:
		case <-t.C:
		case <-p.closed:
		}
		t.Stop()
	}
	return &linkError{msg: p.stderrTail.appendTo(p.exitText()), err: p.waitErr}
}

// isJSONFrame reports whether line is shaped like a JSON-RPC message or
// batch: an object or an array. That tells frames from the banners and log
// lines agents print on stdout ("Data collection is disabled.", "[INFO] …")
// at the cost of two byte reads. Whether it is valid JSON is the
// translator's to judge, in the one pass it makes anyway: validating here
// too cost half of reading a frame, and gjson's recursive validator
// overflowed the stack on a line of a few million "[".
func isJSONFrame(line []byte) bool {
	if len(line) < 2 {
		return false
	}
	first, last := line[0], line[len(line)-1]
	return first == '{' && last == '}' || first == '[' && last == ']'
}

// logStderr logs the child's stderr line by line at Info: stderr is the
// agent's own diagnostic channel and, when it fails to start or dies (a
// missing API key, a crash), the only explanation there is, so it must be
// visible at the default level. It goes to the bridge's stderr, the
// editor's log panel, never to the editor's protocol stream.
func (p *Process) logStderr() {
	defer close(p.stderrDone)
	r := ndjson.NewReader(p.stderr, maxStderrLine)
	for {
		line, err := r.Next()
		var tooLong *ndjson.TooLongError
		switch {
		case errors.As(err, &tooLong):
			head := snippet(tooLong.Head, maxQuoted)
			p.log.Info(head + " (line truncated)")
			p.stderrTail.add(head)
			if p.onStderr != nil {
				p.onStderr(tooLong.Head)
			}
		case err != nil:
			return
		default:
			p.log.Info(string(bytes.TrimRight(line, " \t")))
			p.stderrTail.add(snippet(line, maxTailLine))
			if p.onStderr != nil {
				p.onStderr(line)
			}
		}
	}
}

// stderrTail keeps the child's last few stderr lines (at most maxTailLines,
// each cut at maxTailLine bytes, maxTailBytes in all) for Read's final error. logStderr adds lines; Read
// reads them.
type stderrTail struct {
	mu    sync.Mutex
	lines []string // oldest first; each a single printable line, not empty
	size  int      // total length of lines
}

// add keeps line, trimmed, dropping the oldest lines beyond the bounds.
func (t *stderrTail) add(line string) {
	line = strings.TrimSpace(line)
	if line == "" {
		return
	}
	if len(line) > maxTailLine {
		line = strings.ToValidUTF8(line[:maxTailLine], "") + "…"
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	t.size += len(line)
	for len(t.lines) > maxTailLines || t.size > maxTailBytes && len(t.lines) > 1 {
		t.size -= len(t.lines[0])
		n := copy(t.lines, t.lines[1:])
		t.lines[n] = ""
		t.lines = t.lines[:n]
	}
}

// appendTo returns msg followed by ": " and the lines joined with " | ",
// or msg alone when there are none.
func (t *stderrTail) appendTo(msg string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return msg
	}
	return msg + ": " + strings.Join(t.lines, " | ")
}

// startError explains why the agent command could not start, naming it
// once: exec's own errors repeat the path ("fork/exec /x: no such file or
// directory"), so for those only the cause is kept; others (a Dir that
// does not exist: "chdir /y: no such file or directory") keep their words.
func startError(path string, err error) error {
	cause := err
	var pe *fs.PathError
	var ee *exec.Error
	switch {
	case errors.As(err, &ee):
		cause = ee.Err
	case errors.As(err, &pe) && pe.Op == "fork/exec":
		cause = pe.Err
	case errors.As(err, &pe) && pe.Op == "chdir":
		cause = fmt.Errorf("working directory %s: %w", pe.Path, pe.Err)
	}
	return &linkError{msg: fmt.Sprintf("agent command %q could not start: %s", path, cause), err: err}
}

// envNames lists the keys of "KEY=value" entries, for logging without values.
func envNames(env []string) []string {
	names := make([]string, len(env))
	for i, kv := range env {
		names[i], _, _ = strings.Cut(kv, "=")
	}
	return names
}
