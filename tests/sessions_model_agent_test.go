package tests

// The agent behind TestSessionsModel: the fake ACP agent (fakeagent.Serve)
// behind a small frame filter that gives it the session discipline of real
// agents, which the fake agent itself does not check:
//
//   - it answers session/new itself, numbering ids per process ("sess-1",
//     "sess-2", … in every process, as the fake agent does, so that two
//     processes hand out the same ids);
//   - strict and keep modes answer a session/prompt naming a session this
//     process never opened with -32002, as real agents do (lenient mode
//     passes it on, and the fake agent streams under any id);
//   - keep mode is an agent that keeps its sessions across processes (as
//     Claude Code does on disk): ids unique over processes ("keep-PID-N"),
//     sessionCapabilities.resume advertised, and session/resume of an id
//     any process of it handed out answered, of any other id -32002. Every
//     session/new and resume is written to an events file the test reads.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// The model agent's environment: its mode ("strict", "lenient", "keep") and,
// in keep mode, the directory of its events file.
const (
	envModelMode = "MODEL_AGENT_MODE"
	envModelDir  = "MODEL_AGENT_DIR"
)

func init() { ChildAgents["model"] = runModelAgent }

// modelAgent is the filter's state.
type modelAgent struct {
	mode, dir string

	wmu sync.Mutex // one whole line at a time on stdout
	out io.Writer

	mu      sync.Mutex
	n       int
	known   map[string]bool // sessions this process opened (new or resume)
	initIDs map[string]bool // raw ids of initialize requests
}

func runModelAgent() int {
	a := &modelAgent{mode: os.Getenv(envModelMode), dir: os.Getenv(envModelDir), out: os.Stdout,
		known: map[string]bool{}, initIDs: map[string]bool{}}
	toFake, fakeIn := io.Pipe()
	fromFake, fakeOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- fakeagent.Serve(toFake, fakeOut, fakeagent.Options{
			Transport: "stdio",
			Die:       func() { os.Exit(3) },
			Close:     func() { os.Stdout.Close(); os.Exit(0) },
			Logger:    slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		fakeOut.Close()
	}()
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		br := bufio.NewReaderSize(fromFake, 1<<20)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				a.send(a.outgoing(bytes.TrimRight(line, "\n")))
			}
			if err != nil {
				return
			}
		}
	}()
	br := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if frame := bytes.TrimRight(line, "\r\n"); len(bytes.TrimSpace(frame)) > 0 && !a.incoming(frame) {
			if _, werr := fakeIn.Write(append(frame, '\n')); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	fakeIn.Close()
	err := <-served
	<-pumped
	if err != nil {
		fmt.Fprintln(os.Stderr, "model agent:", err)
		return 1
	}
	return 0
}

func (a *modelAgent) send(frame []byte) {
	a.wmu.Lock()
	defer a.wmu.Unlock()
	_, _ = a.out.Write(append(frame, '\n'))
}

func (a *modelAgent) reply(id gjson.Result, result string) {
	a.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id.Raw, result))
}

func (a *modelAgent) notFound(id gjson.Result, sid string) {
	msg, _ := json.Marshal(fmt.Sprintf("Resource not found: this agent has no session %q", sid))
	a.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32002,"message":%s}}`, id.Raw, msg))
}

// incoming handles a frame from the bridge itself and reports whether it
// did; the others go to the fake agent.
func (a *modelAgent) incoming(frame []byte) bool {
	id, method := gjson.GetBytes(frame, "id"), gjson.GetBytes(frame, "method").Str
	if !id.Exists() || method == "" {
		return false
	}
	sid := gjson.GetBytes(frame, "params.sessionId").Str
	a.mu.Lock()
	defer a.mu.Unlock()
	switch method {
	case "initialize":
		a.initIDs[id.Raw] = true
	case "session/new":
		a.n++
		sid = fmt.Sprintf("sess-%d", a.n)
		if a.mode == "keep" {
			sid = fmt.Sprintf("keep-%d-%d", os.Getpid(), a.n)
			a.event("new " + sid)
		}
		a.known[sid] = true
		b, _ := json.Marshal(map[string]string{"sessionId": sid})
		a.reply(id, string(b))
		return true
	case "session/resume":
		if a.mode != "keep" {
			return false
		}
		if !keptSessions(a.dir)[sid] {
			a.event("resume-unknown " + sid)
			a.notFound(id, sid)
			return true
		}
		a.event("resume " + sid)
		a.known[sid] = true
		a.reply(id, "{}")
		return true
	case "session/prompt":
		if a.mode != "lenient" && !a.known[sid] {
			a.notFound(id, sid)
			return true
		}
	}
	return false
}

// outgoing rewrites a frame of the fake agent: in keep mode its initialize
// answer advertises session/resume.
func (a *modelAgent) outgoing(frame []byte) []byte {
	if a.mode != "keep" {
		return frame
	}
	id := gjson.GetBytes(frame, "id")
	a.mu.Lock()
	isInit := id.Exists() && a.initIDs[id.Raw] && gjson.GetBytes(frame, "result").Exists()
	a.mu.Unlock()
	if !isInit {
		return frame
	}
	var msg map[string]json.RawMessage
	var res, caps map[string]json.RawMessage
	if json.Unmarshal(frame, &msg) != nil || json.Unmarshal(msg["result"], &res) != nil || json.Unmarshal(res["agentCapabilities"], &caps) != nil {
		return frame
	}
	caps["sessionCapabilities"] = json.RawMessage(`{"resume":{}}`)
	res["agentCapabilities"], _ = json.Marshal(caps)
	msg["result"], _ = json.Marshal(res)
	out, err := json.Marshal(msg)
	if err != nil {
		return frame
	}
	return out
}

// event appends a line to the keep mode's events file.
func (a *modelAgent) event(line string) {
	f, err := os.OpenFile(filepath.Join(a.dir, "events"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, "model agent:", err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(line + "\n")
}

// modelEvents returns the keep mode's events so far ("new ID", "resume ID",
// "resume-unknown ID").
func modelEvents(dir string) []string {
	data, _ := os.ReadFile(filepath.Join(dir, "events"))
	return strings.FieldsFunc(string(data), func(r rune) bool { return r == '\n' })
}

// keptSessions are the ids any keep-mode process handed out.
func keptSessions(dir string) map[string]bool {
	kept := map[string]bool{}
	for _, ev := range modelEvents(dir) {
		if kind, id, _ := strings.Cut(ev, " "); kind == "new" {
			kept[id] = true
		}
	}
	return kept
}
