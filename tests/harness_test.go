package tests

// The harness: spawn the bridge as an editor does, tee both of its pipes,
// and drive it either with acp-go-sdk's client (Editor) or with raw lines
// (Bridge.WriteLine / Bridge.Next). Everything here is reusable by tests for
// other dialects: Transport, StartBridge, Editor, Line.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/coder/acp-go-sdk"
	"github.com/tidwall/gjson"
)

// WaitTimeout bounds every wait for something that should happen promptly.
// It is generous because the machine is shared; tests that assert latency
// measure it explicitly.
const WaitTimeout = 10 * time.Second

// Agent is a fake agent made ready for one bridge.
type Agent struct {
	// Args reach the agent from the bridge's command line: "--url ws://…"
	// or "-- <argv>". They go after the bridge's own flags.
	Args []string
	// Env is added to the bridge's environment (and so its child's).
	Env []string
	// WS is the agent's server when it is reached over a WebSocket.
	WS *fakeagent.WSServer
}

// Transport is one way of reaching a fake agent.
type Transport struct {
	Name string
	// Start prepares an agent for one bridge; it registers its own cleanup.
	Start func(t *testing.T) Agent
}

// WSTransport serves an agent (fakeagent.Serve when serve is nil) over a
// WebSocket and points the bridge at it with --url.
func WSTransport(serve fakeagent.ServeFunc) Transport {
	return WSTransportWith(fakeagent.WSOptions{Serve: serve})
}

// WSTransportWith is WSTransport for a server shaped by o (o.Log is the
// harness's).
func WSTransportWith(o fakeagent.WSOptions) Transport {
	return Transport{Name: "ws", Start: func(t *testing.T) Agent {
		s := StartWSAgent(t, o)
		return Agent{Args: []string{"--url", s.URL}, WS: s}
	}}
}

// StartWSAgent starts a fake WebSocket agent shaped by o, closed when the
// test ends (Close may also be called earlier, to kill it); its log is shown
// if the test fails. With o.Addr it listens where an earlier agent did.
func StartWSAgent(t *testing.T, o fakeagent.WSOptions) *fakeagent.WSServer {
	t.Helper()
	log := &lockedBuffer{}
	o.Log = log
	s, err := fakeagent.StartWSServer(o)
	// A restart on the port of an agent just closed can find it taken for
	// a moment: an outgoing connection's ephemeral port, or the bridge's
	// own redial of that address connected to itself (a TCP self-connect,
	// possible while nothing listens there). Such a holder lets go soon.
	for deadline := time.Now().Add(10 * time.Second); o.Addr != "" && errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		s, err = fakeagent.StartWSServer(o)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			t.Logf("fake agent (ws %s) log:\n%s", s.Addr, tail(log.String(), 32<<10))
		}
	})
	return s
}

// ChildTransport runs the ChildAgents entry name as the bridge's child
// process: the test binary itself, re-executed by TestMain.
func ChildTransport(name string) Transport {
	return Transport{Name: "child", Start: func(t *testing.T) Agent {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		return Agent{Args: []string{"--", exe}, Env: []string{"FAKE_AGENT=" + name}}
	}}
}

// Transports are the ways the ACP relay scenarios reach the fake ACP agent.
var Transports = []Transport{WSTransport(nil), ChildTransport("acp")}

// ForEachTransport runs f as a parallel subtest per entry of Transports, so
// that every scenario makes the same assertions over a WebSocket and over a
// child.
func ForEachTransport(t *testing.T, f func(t *testing.T, tr Transport)) {
	t.Helper()
	RunTransports(t, Transports, f)
}

// RunTransports runs f as a parallel subtest per transport in trs.
func RunTransports(t *testing.T, trs []Transport, f func(t *testing.T, tr Transport)) {
	t.Helper()
	for _, tr := range trs {
		t.Run(tr.Name, func(t *testing.T) {
			t.Parallel()
			f(t, tr)
		})
	}
}

// Bridge is one running acp-bridge process.
type Bridge struct {
	t   *testing.T
	cmd *exec.Cmd
	// In is the bridge's stdin. Writes must be whole lines; it records the
	// ids of the requests written so replies can be checked.
	In *EditorInput
	// Out records every line the bridge wrote to stdout.
	Out *Stdout

	stderr     lockedBuffer
	outR       *os.File // the read end of stdout, for StdoutBlocked
	exited     chan struct{}
	exitState  *os.ProcessState
	readerDone chan struct{}

	cursorMu sync.Mutex
	cursor   int
}

// StartBridge runs the binary with args (flags, then the agent's Args) and
// env added to the environment. When feed is not nil every stdout line is
// also written to it (an SDK client's input); write errors stop the feed but
// not the recording. Cleanup closes stdin, requires the bridge to exit
// within 5 s, reports every schema violation seen on stdout and, when the
// test failed, logs the bridge's stderr.
func StartBridge(t *testing.T, args, env []string, feed io.WriteCloser) *Bridge {
	t.Helper()
	return StartBridgeBinary(t, BridgeBin, args, env, feed)
}

// StartBridgeBinary is StartBridge with another build of the bridge.
func StartBridgeBinary(t *testing.T, bin string, args, env []string, feed io.WriteCloser) *Bridge {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = hermeticEnv(t, env)
	// *os.File pipes, not StdoutPipe: Wait must not close our read ends
	// while lines are still buffered, and must not wait for a grandchild
	// that inherited stderr.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	// Own process group, so a hung bridge and its agent can be killed
	// together without touching the test binary.
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	inR.Close()
	outW.Close()
	errW.Close()

	b := &Bridge{
		t:          t,
		cmd:        cmd,
		outR:       outR,
		In:         &EditorInput{w: inW, sent: make(map[string][]string)},
		exited:     make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	b.Out = newStdout(b.In)
	stderrCopied := make(chan struct{})
	go func() {
		st, _ := cmd.Process.Wait()
		b.exitState = st
		// What the bridge wrote to stderr before it exited is in b.stderr
		// once exited is closed: a test that reads Stderr after the exit
		// sees all of it. (A grandchild that inherited stderr may hold
		// the pipe open: the copy is waited for a while, not for good.)
		timer := time.NewTimer(2 * time.Second)
		select {
		case <-stderrCopied:
		case <-timer.C:
		}
		timer.Stop()
		close(b.exited)
	}()
	go func() {
		_, _ = io.Copy(&b.stderr, errR)
		errR.Close()
		close(stderrCopied)
	}()
	go b.readStdout(outR, feed)

	t.Cleanup(func() {
		b.In.Close()
		select {
		case <-b.exited:
		case <-time.After(5 * time.Second):
			t.Errorf("bridge still running 5 s after stdin EOF; killing it")
			killGroup(cmd)
			<-b.exited
		}
		select {
		case <-b.readerDone:
		case <-time.After(5 * time.Second):
			t.Errorf("bridge stdout still open 5 s after the bridge exited (a grandchild holds it?)")
		}
		for _, p := range b.Out.Problems() {
			t.Errorf("stdout: %s", p)
		}
		// The bridge (and a child agent, whose stderr it logs) is built
		// with -race when the tests are.
		if strings.Contains(b.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("the race detector reported a data race in the bridge or its agent (see stderr)")
		}
		if t.Failed() {
			t.Logf("bridge %v stderr:\n%s", args, tail(b.stderr.String(), 64<<10))
		}
	})
	return b
}

// hermeticEnv is the test's environment without the bridge's ACP_BRIDGE_*
// flag twins and with a private config directory, so a developer's own
// configuration cannot change what the tests see, plus extra.
func hermeticEnv(t testing.TB, extra []string) []string {
	var env []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "ACP_BRIDGE_"), strings.HasPrefix(kv, "XDG_CONFIG_HOME="):
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
		default:
			env = append(env, kv)
		}
	}
	// A -race binary sleeps 1 s at exit by default; every test would pay
	// it twice (bridge and child agent).
	env = append(env, "XDG_CONFIG_HOME="+t.TempDir(), "XDG_STATE_HOME="+t.TempDir(), "GORACE="+gorace)
	return append(env, extra...)
}

func (b *Bridge) readStdout(r *os.File, feed io.WriteCloser) {
	defer close(b.readerDone)
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			b.Out.add(line)
			if feed != nil {
				if _, werr := feed.Write(line); werr != nil {
					feed = nil
				}
			}
		}
		if err != nil {
			b.Out.close()
			if feed != nil {
				feed.Close()
			}
			return
		}
	}
}

// WriteLine writes s plus "\n" to the bridge's stdin.
func (b *Bridge) WriteLine(s string) {
	b.t.Helper()
	if _, err := b.In.Write([]byte(s + "\n")); err != nil {
		b.t.Fatalf("writing to bridge stdin: %v", err)
	}
}

// Next returns the next stdout line not yet returned by Next, waiting up to
// timeout. Raw tests use it to assert exactly what comes out, in order.
func (b *Bridge) Next(timeout time.Duration) Line {
	b.t.Helper()
	b.cursorMu.Lock()
	defer b.cursorMu.Unlock()
	l, ok := b.Out.at(b.cursor, timeout)
	if !ok {
		b.t.Fatalf("no stdout line #%d within %v (stdout has %d lines, eof=%v)", b.cursor, timeout, b.Out.Len(), b.Out.EOF())
	}
	b.cursor++
	return l
}

// ExpectSilence fails if stdout gets a line beyond those already returned by
// Next within d.
func (b *Bridge) ExpectSilence(d time.Duration) {
	b.t.Helper()
	b.cursorMu.Lock()
	defer b.cursorMu.Unlock()
	if l, ok := b.Out.at(b.cursor, d); ok {
		b.t.Fatalf("unexpected stdout line: %s", l)
	}
}

// Exited is closed once the process has exited.
func (b *Bridge) Exited() <-chan struct{} { return b.exited }

// WaitExit waits up to timeout for the process to exit and returns its exit
// code (-1 when killed by a signal).
func (b *Bridge) WaitExit(timeout time.Duration) (code int, ok bool) {
	select {
	case <-b.exited:
		return b.exitState.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// Pid is the bridge's process id.
func (b *Bridge) Pid() int { return b.cmd.Process.Pid }

// Signal sends sig to the bridge process (not its group).
func (b *Bridge) Signal(sig os.Signal) {
	b.t.Helper()
	if err := b.cmd.Process.Signal(sig); err != nil {
		b.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Stderr returns what the bridge wrote to stderr so far.
func (b *Bridge) Stderr() string { return b.stderr.String() }

// Line is one line the bridge wrote to stdout.
type Line struct {
	// N is the line's index on stdout, from 0.
	N int
	// Raw is the line without its "\n".
	Raw []byte
	// At is when the harness read it.
	At time.Time
}

func (l Line) String() string { return truncate(string(l.Raw), 600) }

// Get returns a gjson path of the line.
func (l Line) Get(path string) gjson.Result { return gjson.GetBytes(l.Raw, path) }

// ID is the raw bytes of the line's "id", "" when absent.
func (l Line) ID() string {
	if r := l.Get("id"); r.Exists() {
		return r.Raw
	}
	return ""
}

// Method is the line's "method", "" for a response.
func (l Line) Method() string { return l.Get("method").Str }

// IsResponse reports whether the line answers a request.
func (l Line) IsResponse() bool { return l.Get("id").Exists() && !l.Get("method").Exists() }

// ErrorCode returns error.code of a failed response.
func (l Line) ErrorCode() (int, bool) {
	r := l.Get("error.code")
	return int(r.Int()), r.Exists()
}

// Stdout records the bridge's stdout and checks every line as it arrives.
type Stdout struct {
	mu       sync.Mutex
	lines    []Line
	wake     chan struct{}
	eof      bool
	problems []string
	v        *validator
	// cutTailOK: see AllowCutLastLine.
	cutTailOK bool
}

// AllowCutLastLine excuses a last line cut short by the bridge's exit: a
// bridge whose editor stopped reading may die in the middle of a write, and
// the editor, which closed the bridge's stdin, never reads it. Every
// complete line is still checked.
func (s *Stdout) AllowCutLastLine() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cutTailOK = true
}

func newStdout(in *EditorInput) *Stdout {
	return &Stdout{wake: make(chan struct{}), v: newValidator(in)}
}

func (s *Stdout) add(raw []byte) {
	probs := s.v.check(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	l := Line{N: len(s.lines), Raw: bytes.TrimSuffix(raw, []byte("\n")), At: time.Now()}
	s.lines = append(s.lines, l)
	if s.cutTailOK && !bytes.HasSuffix(raw, []byte("\n")) {
		probs = nil // only the last read can lack its "\n"
	}
	for _, p := range probs {
		s.problems = append(s.problems, fmt.Sprintf("line %d: %s\n\tline: %s", l.N, p, l))
	}
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Stdout) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eof = true
	close(s.wake)
	s.wake = make(chan struct{})
}

// Problems returns every violation of the wire rules seen so far.
func (s *Stdout) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

// Lines returns a snapshot of the lines recorded so far.
func (s *Stdout) Lines() []Line {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Line(nil), s.lines...)
}

// Len returns how many lines were recorded so far.
func (s *Stdout) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}

// EOF reports whether stdout has been closed.
func (s *Stdout) EOF() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eof
}

// at waits up to timeout for line i.
func (s *Stdout) at(i int, timeout time.Duration) (Line, bool) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if i < len(s.lines) {
			l := s.lines[i]
			s.mu.Unlock()
			return l, true
		}
		wake, eof := s.wake, s.eof
		s.mu.Unlock()
		if eof {
			return Line{}, false
		}
		select {
		case <-wake:
		case <-deadline.C:
			return Line{}, false
		}
	}
}

// Find waits up to timeout for the first line, from the start, for which
// match is true.
func (s *Stdout) Find(timeout time.Duration, match func(Line) bool) (Line, bool) {
	for i := 0; ; i++ {
		l, ok := s.at(i, timeout)
		if !ok {
			return Line{}, false
		}
		if match(l) {
			return l, true
		}
	}
}

// Response waits for the response whose raw id is exactly id.
func (s *Stdout) Response(t *testing.T, id string) Line {
	t.Helper()
	l, ok := s.Find(WaitTimeout, func(l Line) bool { return l.IsResponse() && l.ID() == id })
	if !ok {
		t.Fatalf("no response with id %s on stdout within %v", id, WaitTimeout)
	}
	return l
}

// EditorInput is the bridge's stdin. It records the raw id and method of
// every request written, before the bytes reach the bridge, so the stdout
// validator can tell which method a response answers.
type EditorInput struct {
	wmu sync.Mutex // serialises whole-line writes (SDK and raw)
	w   io.WriteCloser

	mu      sync.Mutex
	partial []byte
	sent    map[string][]string // raw id → methods sent with it, in order
	lastID  map[string]string   // method → raw id of the last request
	closed  bool
}

// Write writes whole lines; the acp-go-sdk client writes one message per
// call, and so must raw tests.
func (e *EditorInput) Write(p []byte) (int, error) {
	e.record(p)
	e.wmu.Lock()
	defer e.wmu.Unlock()
	return e.w.Write(p)
}

// Close closes the bridge's stdin (EOF for the bridge). Safe to repeat.
func (e *EditorInput) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	return e.w.Close()
}

func (e *EditorInput) record(p []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	data := p
	if len(e.partial) > 0 {
		data = append(e.partial, p...)
		e.partial = nil
	}
	for {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(data) > 0 {
				e.partial = append([]byte(nil), data...)
			}
			return
		}
		line := bytes.TrimRight(data[:i], "\r")
		data = data[i+1:]
		// translate.Valid, not gjson's recursive validator: tests write
		// hostile lines nested millions deep.
		if translate.Valid(line) != nil {
			continue
		}
		m := gjson.ParseBytes(line)
		if !m.IsObject() {
			continue
		}
		id, method := m.Get("id"), m.Get("method")
		if id.Exists() && method.Type == gjson.String {
			e.sent[id.Raw] = append(e.sent[id.Raw], method.Str)
			if e.lastID == nil {
				e.lastID = make(map[string]string)
			}
			e.lastID[method.Str] = id.Raw
		}
	}
}

// methodOf returns the method of the n-th request (from 0) sent with raw id.
func (e *EditorInput) methodOf(id string, n int) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ms := e.sent[id]
	if n < len(ms) {
		return ms[n], true
	}
	return "", false
}

// LastID returns the raw id of the last request sent with method.
func (e *EditorInput) LastID(method string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastID[method]
}

// Editor is an editor made of acp-go-sdk's client connection and FakeEditor,
// talking to a bridge.
type Editor struct {
	*Bridge
	Conn  *acp.ClientSideConnection
	Fake  *FakeEditor
	Agent Agent

	rawMu sync.Mutex
	rawN  int
}

// EditorOptions shape an Editor.
type EditorOptions struct {
	// Args are extra bridge flags (before the agent's Args).
	Args []string
	// NoFS and NoTerminal leave the capabilities out of initialize.
	NoFS, NoTerminal bool
}

// NewEditor starts an agent over tr, a bridge in front of it, and an SDK
// client on the bridge's stdio. Nothing is sent yet.
func NewEditor(t *testing.T, tr Transport, o EditorOptions) *Editor {
	t.Helper()
	agent := tr.Start(t)
	fromBridge, toSDK := io.Pipe()
	args := append(append([]string(nil), o.Args...), agent.Args...)
	b := StartBridge(t, args, agent.Env, toSDK)
	fake := newFakeEditor(o)
	conn := acp.NewClientSideConnection(fake, b.In, fromBridge)
	sdkLog := &lockedBuffer{}
	conn.SetLogger(slog.New(slog.NewTextHandler(sdkLog, nil)))
	go func() {
		// If the SDK stops reading (it dies on lines over 10 MiB), let the
		// harness keep recording instead of blocking on the pipe.
		<-conn.Done()
		fromBridge.CloseWithError(errors.New("editor SDK connection closed"))
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("editor SDK log:\n%s", tail(sdkLog.String(), 16<<10))
		}
	})
	return &Editor{Bridge: b, Conn: conn, Fake: fake, Agent: agent}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// Initialize sends initialize with the options' capabilities.
func (e *Editor) Initialize(t *testing.T) acp.InitializeResponse {
	t.Helper()
	res, err := e.Conn.Initialize(ctxT(t), acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{
			Fs:       acp.FileSystemCapabilities{ReadTextFile: !e.Fake.opt.NoFS, WriteTextFile: !e.Fake.opt.NoFS},
			Terminal: !e.Fake.opt.NoTerminal,
		},
		ClientInfo: &acp.Implementation{Name: "acp-bridge-e2e", Version: "0.0.0"},
	})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return res
}

// NewSession opens a session in cwd (a fresh temporary directory when "").
func (e *Editor) NewSession(t *testing.T, cwd string) acp.SessionId {
	t.Helper()
	if cwd == "" {
		cwd = t.TempDir()
	}
	res, err := e.Conn.NewSession(ctxT(t), acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	return res.SessionId
}

// Start is Initialize plus NewSession, the way most scenarios begin.
func (e *Editor) Start(t *testing.T) acp.SessionId {
	t.Helper()
	e.Initialize(t)
	return e.NewSession(t, "")
}

// Prompt sends one text prompt.
func (e *Editor) Prompt(ctx context.Context, sid acp.SessionId, text string) (acp.PromptResponse, error) {
	return e.Conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

// RawCall writes a request with params (raw JSON, "" for none) and a fresh
// string id the SDK never uses, alongside the SDK's own traffic, and
// returns the response line. The SDK ignores the answer (no pending id).
func (e *Editor) RawCall(t *testing.T, method, params string) Line {
	t.Helper()
	id := e.RawSend(t, method, params)
	return e.Out.Response(t, id)
}

// RawSend writes a request like RawCall and returns its raw id without
// waiting for the answer.
func (e *Editor) RawSend(t *testing.T, method, params string) string {
	t.Helper()
	e.rawMu.Lock()
	e.rawN++
	id := fmt.Sprintf(`"raw-%d"`, e.rawN)
	e.rawMu.Unlock()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q`, id, method)
	if params != "" {
		line += `,"params":` + params
	}
	e.WriteLine(line + "}")
	return id
}

// Journal asks the fake agent what it received (extension _test/journal).
func (e *Editor) Journal(t *testing.T) fakeagent.Journal {
	t.Helper()
	raw, err := e.Conn.CallExtension(ctxT(t), "_test/journal", struct{}{})
	if err != nil {
		t.Fatalf("_test/journal: %v", err)
	}
	var j fakeagent.Journal
	if err := json.Unmarshal(raw, &j); err != nil {
		t.Fatalf("_test/journal result %s: %v", raw, err)
	}
	return j
}

// WaitEvent polls the agent's journal until an event equals want.
func (e *Editor) WaitEvent(t *testing.T, want string) fakeagent.Journal {
	t.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for {
		j := e.Journal(t)
		for _, ev := range j.Events {
			if ev == want {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("agent event %q did not happen within %v; events: %q", want, WaitTimeout, j.Events)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// FakeEditor is the editor's side of ACP (it implements acp.Client): it
// records what the agent asks for and answers from an in-memory file system
// and a pretend terminal.
type FakeEditor struct {
	opt EditorOptions

	mu          sync.Mutex
	updates     []acp.SessionNotification
	files       map[string]string
	reads       []acp.ReadTextFileRequest
	writes      []acp.WriteTextFileRequest
	permissions []acp.RequestPermissionRequest
	terminals   []acp.CreateTerminalRequest
	released    []string
	onPerm      func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error)
}

var (
	_ acp.Client                 = (*FakeEditor)(nil)
	_ acp.ExtensionMethodHandler = (*FakeEditor)(nil)
)

func newFakeEditor(o EditorOptions) *FakeEditor {
	return &FakeEditor{opt: o, files: make(map[string]string)}
}

// SetFile puts a file in the editor's in-memory file system (its "unsaved
// buffers", which fs/read_text_file must see instead of the disk).
func (c *FakeEditor) SetFile(path, content string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.files[path] = content
}

// OnPermission replaces the default permission policy (select the first
// allow_once option).
func (c *FakeEditor) OnPermission(f func(context.Context, acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onPerm = f
}

// Updates returns the session/update notifications received for sid.
func (c *FakeEditor) Updates(sid acp.SessionId) []acp.SessionNotification {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []acp.SessionNotification
	for _, u := range c.updates {
		if u.SessionId == sid {
			out = append(out, u)
		}
	}
	return out
}

// Chunks returns the texts of the agent_message_chunk updates for sid.
func (c *FakeEditor) Chunks(sid acp.SessionId) []string {
	var out []string
	for _, u := range c.Updates(sid) {
		if m := u.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
			out = append(out, m.Content.Text.Text)
		}
	}
	return out
}

func (c *FakeEditor) SessionUpdate(ctx context.Context, p acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, p)
	return nil
}

func (c *FakeEditor) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.permissions = append(c.permissions, p)
	f := c.onPerm
	c.mu.Unlock()
	if f != nil {
		return f(ctx, p)
	}
	for _, o := range p.Options {
		if o.Kind == acp.PermissionOptionKindAllowOnce {
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(o.OptionId)}, nil
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
}

func (c *FakeEditor) ReadTextFile(ctx context.Context, p acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads = append(c.reads, p)
	content, ok := c.files[p.Path]
	if !ok {
		return acp.ReadTextFileResponse{}, &acp.RequestError{Code: -32002, Message: "Resource not found", Data: map[string]any{"uri": p.Path}}
	}
	return acp.ReadTextFileResponse{Content: content}, nil
}

func (c *FakeEditor) WriteTextFile(ctx context.Context, p acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes = append(c.writes, p)
	c.files[p.Path] = p.Content
	return acp.WriteTextFileResponse{}, nil
}

// editorTerminalID is the id the pretend terminal hands out.
const editorTerminalID = "term-42"

func (c *FakeEditor) CreateTerminal(ctx context.Context, p acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.terminals = append(c.terminals, p)
	return acp.CreateTerminalResponse{TerminalId: editorTerminalID}, nil
}

func (c *FakeEditor) TerminalOutput(ctx context.Context, p acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	if p.TerminalId != editorTerminalID {
		return acp.TerminalOutputResponse{}, acp.NewInvalidParams(map[string]any{"terminalId": p.TerminalId})
	}
	return acp.TerminalOutputResponse{Output: "hello", ExitStatus: &acp.TerminalExitStatus{ExitCode: acp.Ptr(0)}}, nil
}

func (c *FakeEditor) WaitForTerminalExit(ctx context.Context, p acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	if p.TerminalId != editorTerminalID {
		return acp.WaitForTerminalExitResponse{}, acp.NewInvalidParams(map[string]any{"terminalId": p.TerminalId})
	}
	return acp.WaitForTerminalExitResponse{ExitCode: acp.Ptr(7)}, nil
}

func (c *FakeEditor) ReleaseTerminal(ctx context.Context, p acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released = append(c.released, p.TerminalId)
	return acp.ReleaseTerminalResponse{}, nil
}

func (c *FakeEditor) KillTerminal(ctx context.Context, p acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, nil
}

// HandleExtensionMethod answers _test/editor-echo with {"editorEcho":params}.
func (c *FakeEditor) HandleExtensionMethod(ctx context.Context, method string, params json.RawMessage) (any, error) {
	if method != "_test/editor-echo" {
		return nil, acp.NewMethodNotFound(method)
	}
	return map[string]json.RawMessage{"editorEcho": params}, nil
}

// Reads, Writes, Permissions, Terminals and Released return copies of the
// calls the agent made to the editor, oldest first.
func (c *FakeEditor) Reads() []acp.ReadTextFileRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reads)
}

func (c *FakeEditor) Writes() []acp.WriteTextFileRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.writes)
}

func (c *FakeEditor) Permissions() []acp.RequestPermissionRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.permissions)
}

func (c *FakeEditor) Terminals() []acp.CreateTerminalRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.terminals)
}

// Released returns the ids of the terminals released.
func (c *FakeEditor) Released() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.released)
}

// waitUntil polls cond every 5 ms until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d bytes)", len(s))
}

// requestError unwraps an SDK error into its JSON-RPC error.
func requestError(t *testing.T, err error) *acp.RequestError {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T) is not a JSON-RPC error", err, err)
	}
	return re
}

// hasPrefixed returns the first of ss that starts with prefix.
func hasPrefixed(ss []string, prefix string) (string, bool) {
	for _, x := range ss {
		if strings.HasPrefix(x, prefix) {
			return x, true
		}
	}
	return "", false
}
