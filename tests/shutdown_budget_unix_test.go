//go:build unix

package tests

// The bridge's exit is promised within 3 s of the end of its input (and
// serve's within 3 s of SIGTERM), whatever the agent does: here one that
// never answers the prompt in flight, does not exit at its stdin's end and
// ignores SIGTERM, so that every phase of the shutdown takes as long as it
// may.

import (
	"bufio"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	"github.com/tidwall/gjson"
)

func init() {
	ChildAgents["stubborn"] = runStubbornAgent
}

// runStubbornAgent answers initialize and session/new, answers a prompt
// with the update "got-prompt" and nothing else, ignores SIGTERM and stays
// after its stdin ends: only SIGKILL ends it.
func runStubbornAgent() int {
	signal.Ignore(syscall.SIGTERM)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		msg := sc.Bytes()
		id := gjson.GetBytes(msg, "id").Raw
		switch gjson.GetBytes(msg, "method").Str {
		case "initialize":
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", id, fakeagent.InitializeResult([]byte("1"), "stdio"))
		case "session/new":
			n++
			fmt.Printf(`{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"stub-%d"}}`+"\n", id, n)
		case "session/prompt":
			sid := gjson.GetBytes(msg, "params.sessionId").Str
			fmt.Printf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"got-prompt"}}}}`+"\n", sid)
		}
	}
	time.Sleep(time.Hour) // stdin has ended; SIGTERM is ignored
	return 0
}

// End of input with a prompt in flight, in front of an agent that ignores
// SIGTERM: the bridge exits 0 within 3 s of its input's end, the prompt
// answered exactly once.
func TestShutdown_EndOfInputWithStubbornAgentWithin3s(t *testing.T) {
	t.Parallel()
	b := StartBridge(t, []string{"--", selfExe(t)}, []string{"FAKE_AGENT=stubborn"}, nil)
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	if l := b.Next(WaitTimeout); !l.Get("result").Exists() {
		t.Fatalf("initialize: %s", l)
	}
	b.WriteLine(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	l := b.Next(WaitTimeout)
	sid := l.Get("result.sessionId").Str
	if sid == "" {
		t.Fatalf("session/new: %s", l)
	}
	b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"hi"}]}}`)
	if _, ok := b.Out.Find(WaitTimeout, func(l Line) bool { return strings.Contains(string(l.Raw), "got-prompt") }); !ok {
		t.Fatal("the prompt never reached the agent")
	}
	start := time.Now()
	b.In.Close()
	code, ok := b.WaitExit(10 * time.Second)
	took := time.Since(start)
	t.Logf("exit %d %v after the end of input", code, took.Round(time.Millisecond))
	if !ok {
		t.Fatalf("still running 10 s after the end of its input")
	}
	if code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if took > exitPromise {
		t.Errorf("exit took %v after the end of input, promised %v", took.Round(time.Millisecond), exitPromise)
	}
	requireOneAnswer(t, b.Out.Lines(), "3")
}

// requireOneAnswer requires exactly one answer to id among lines.
func requireOneAnswer(t *testing.T, lines []Line, id string) {
	t.Helper()
	answers := 0
	for _, l := range lines {
		if l.IsResponse() && l.ID() == id {
			answers++
			if !l.Get("result").Exists() && !strings.Contains(l.Get("error.message").Str, "shutting down") {
				t.Errorf("prompt answered %s", l)
			}
		}
	}
	if answers != 1 {
		t.Errorf("the prompt in flight got %d answers, want 1", answers)
	}
}

// SIGTERM to serve with a prompt in flight on each of two connections
// (WebSocket, Streamable HTTP), in front of agents that ignore SIGTERM:
// serve exits 0 within 3 s, each prompt answered exactly once.
func TestShutdown_ServeSIGTERMWithStubbornAgentsWithin3s(t *testing.T) {
	t.Parallel()
	srv := StartServe(t, []string{"--", selfExe(t)}, []string{"FAKE_AGENT=stubborn"})
	var clients []*remoteClient
	for _, ws := range []bool{true, false} {
		c, err := dialServed(t, srv, ws)
		if err != nil {
			t.Fatal(err)
		}
		defer c.stop()
		servedTurn(t, c, "hi", "got-prompt")
		clients = append(clients, c)
	}
	start := time.Now()
	code, ok := srv.Stop(10 * time.Second)
	took := time.Since(start)
	t.Logf("serve: exit %d %v after SIGTERM", code, took.Round(time.Millisecond))
	if !ok || code != 0 {
		t.Fatalf("serve after SIGTERM: status %d, exited %v", code, ok)
	}
	if took > exitPromise {
		t.Errorf("serve took %v to exit after SIGTERM, promised %v", took.Round(time.Millisecond), exitPromise)
	}
	for i, c := range clients {
		answers := 0
		for {
			m, err := c.Next(time.Second)
			if err != nil {
				break // the connection ended
			}
			if m.Get("id").Int() == 3 && !m.Get("method").Exists() {
				answers++
			}
		}
		if answers != 1 {
			t.Errorf("connection %d: the prompt in flight got %d answers, want 1", i, answers)
		}
	}
}
