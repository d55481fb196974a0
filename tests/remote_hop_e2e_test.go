package tests

// Where a bridge meets a bridge: acp-bridge --url in front of acp-bridge
// serve, the README's "Remote agents" recipe. Everything the agent asks of
// the editor must cross both hops as it crosses one.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
)

// TestBridgeToBridgeClientMethods: a v1 editor with a file system and
// terminals, in front of acp-bridge --url http(s)/ws, in front of acp-bridge
// serve, in front of a v1 agent that calls every kind of client method:
// fs/read_text_file and fs/write_text_file, the terminal/* family,
// session/request_permission and an extension method. Each reaches the
// editor and its answer the agent, over both transports, as when the agent
// is the bridge's own child.
func TestBridgeToBridgeClientMethods(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	serve := StartServe(t, append([]string{"--no-sessions"}, agent.Args...), agent.Env)
	for _, scheme := range []string{"http", "ws"} {
		t.Run(scheme, func(t *testing.T) {
			url := scheme + strings.TrimPrefix(serve.Endpoint, "http")
			e := NewEditor(t, urlTransport(url), EditorOptions{Args: []string{"--no-sessions", "--log-level", "debug"}})
			e.Initialize(t)
			sid := e.NewSession(t, "")
			e.Fake.SetFile("/editor/buffer.txt", "unsaved")
			for _, c := range []struct{ prompt, want string }{
				{"fs /editor/buffer.txt", "fs:wrote"},
				{"terminal", fmt.Sprintf("terminal:%s:hello:7", editorTerminalID)},
				{"permission", "permission:selected:allow-once"},
				{"ext-editor", `ext:{"editorEcho":{"from":"agent","n":[1,2,3]}}`},
			} {
				res, err := e.Prompt(ctxT(t), sid, c.prompt)
				if err != nil {
					t.Errorf("prompt %q: the turn failed: %v", c.prompt, err)
					continue
				}
				if res.StopReason != "end_turn" {
					t.Errorf("prompt %q: stopReason %q", c.prompt, res.StopReason)
				}
				if chunks := e.Fake.Chunks(sid); !slices.Contains(chunks, c.want) {
					t.Errorf("prompt %q: no %q among the chunks %q", c.prompt, c.want, chunks)
				}
			}
			if w := e.Fake.Writes(); len(w) != 1 || w[0].Path != "/editor/buffer.txt.out" || w[0].Content != "copied:unsaved" {
				t.Errorf("the editor's writes: %+v, want one of copied:unsaved to /editor/buffer.txt.out", w)
			}
			if r := e.Fake.Released(); !slices.Equal(r, []string{editorTerminalID}) {
				t.Errorf("released terminals %q, want %q", r, editorTerminalID)
			}
		})
	}
}

// TestBridgeToBridgeClientMethodsV2Editor: the same hop with the official
// TypeScript SDK's v2 client as the editor. v2 has no client file system
// or terminals: the agent's file access is served from disk (the session's
// directory, as for a v2 editor on stdio), a terminal is refused, and so is
// an extension method the editor does not have; each fails only its
// request, and every turn ends as the agent ends it.
func TestBridgeToBridgeClientMethodsV2Editor(t *testing.T) {
	NodeSDK(t)
	agent := ChildTransport("acp").Start(t)
	serve := StartServe(t, append([]string{"--no-sessions"}, agent.Args...), agent.Env)
	for _, scheme := range []string{"http", "ws"} {
		t.Run(scheme, func(t *testing.T) {
			cwd := t.TempDir()
			file := filepath.Join(cwd, "in.txt")
			if err := os.WriteFile(file, []byte("from disk"), 0o644); err != nil {
				t.Fatal(err)
			}
			url := scheme + strings.TrimPrefix(serve.Endpoint, "http")
			steps := fmt.Sprintf(`[{"prompt":"fs %s"},{"prompt":"terminal"},{"prompt":"permission"},{"prompt":"ext-editor"}]`, file)
			res := runV2Editor(t, urlTransport(url), []string{"--no-sessions"}, cwd, steps)
			wantV2Turn(t, res.turn(t, 0), "end_turn", "fs:wrote")
			if got, err := os.ReadFile(file + ".out"); err != nil || string(got) != "copied:from disk" {
				t.Errorf("the agent's write: %q, %v", got, err)
			}
			wantV2Turn(t, res.turn(t, 1), "end_turn", "terminal:create-error:-32601")
			wantV2Turn(t, res.turn(t, 2), "end_turn", "permission:selected:allow-once")
			wantV2Turn(t, res.turn(t, 3), "end_turn", "ext-error:-32601")
		})
	}
}

// TestURLRepeatedInitialize: an editor that initializes again on the same
// connection is answered, and its session goes on, whichever way the
// bridge reaches the remote end: Streamable HTTP or WebSocket, to
// acp-bridge serve or to the TypeScript SDK's AcpServer. Both servers
// refuse initialize on an existing HTTP connection, so over HTTP the bridge
// answers with the connection's initialize; over a WebSocket the message
// reaches the server: serve's engine answers it, the SDK's AcpServer
// refuses it (-32600) and the bridge answers with the first answer again
// (a repeated initialize is always answered); either way the connection
// and the session stay.
func TestURLRepeatedInitialize(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	ends := map[string]string{
		"serve":      StartServe(t, append([]string{"--no-sessions"}, agent.Args...), agent.Env).Endpoint,
		"sdk-server": StartSDKServer(t),
	}
	for _, end := range []string{"serve", "sdk-server"} {
		for _, scheme := range []string{"http", "ws"} {
			t.Run(end+"/"+scheme, func(t *testing.T) {
				url := scheme + strings.TrimPrefix(ends[end], "http")
				e := NewEditor(t, urlTransport(url), EditorOptions{Args: []string{"--no-sessions", "--log-level", "debug"}})
				first := e.Initialize(t)
				sid := e.NewSession(t, "")
				turn := func(text string) {
					t.Helper()
					res, err := e.Prompt(ctxT(t), sid, text)
					if err != nil || res.StopReason != acp.StopReasonEndTurn {
						t.Fatalf("prompt %q: %+v, %v", text, res, err)
					}
				}
				turn("stream 2")
				again, err := e.Conn.Initialize(ctxT(t), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
				if err != nil || again.ProtocolVersion != first.ProtocolVersion || again.AgentInfo == nil || first.AgentInfo == nil || again.AgentInfo.Name != first.AgentInfo.Name {
					t.Errorf("the repeated initialize was answered %+v, %v; the first %+v", again, err, first)
				}
				turn("stream 3")
				if log := e.Stderr(); strings.Contains(log, "agent link lost") {
					t.Errorf("the link was lost on the repeated initialize:\n%s", log)
				}
			})
		}
	}
}

// TestBridgeToBridgeLoadReplaysFirst: a durable session recorded through
// serve is loaded by a second editor through acp-bridge --url http(s)
// speaking v1 to serve (so the hop carries session/load itself): the
// editor is sent the session's whole history, then the answer.
func TestBridgeToBridgeLoadReplaysFirst(t *testing.T) {
	agent := ChildTransport("acp").Start(t)
	serve := StartServe(t, append([]string{"--state-dir", t.TempDir()}, agent.Args...), agent.Env)
	args := EditorOptions{Args: []string{"--no-sessions", "--agent-protocol", "1"}}
	first := NewEditor(t, urlTransport(serve.Endpoint), args)
	first.Initialize(t)
	cwd := t.TempDir()
	sid := first.NewSession(t, cwd)
	const n = 300
	promptTurn(t, first, sid, n)
	stopBridge(t, first.Bridge)
	// serve's connection ends with its client: the session is free once
	// serve says it ended.
	deadline := time.Now().Add(WaitTimeout)
	for !strings.Contains(serve.Stderr(), "session ended") {
		if time.Now().After(deadline) {
			t.Fatal("serve did not end the first editor's session")
		}
		time.Sleep(20 * time.Millisecond)
	}

	second := NewEditor(t, urlTransport(serve.Endpoint), args)
	second.Initialize(t)
	id := second.RawSend(t, "session/load", fmt.Sprintf(`{"sessionId":%q,"cwd":%q,"mcpServers":[]}`, sid, cwd))
	answer := second.Out.Response(t, id)
	if _, failed := answer.ErrorCode(); failed {
		t.Fatalf("session/load: %s", answer)
	}
	var replayed []string
	for _, l := range second.Out.Lines() {
		if l.ID() == id && l.IsResponse() {
			break
		}
		if l.Method() == "session/update" && l.Get("params.update.sessionUpdate").Str == "agent_message_chunk" {
			replayed = append(replayed, l.Get("params.update.content.text").Str)
		}
	}
	if len(replayed) != n || replayed[0] != "chunk-0000" || replayed[n-1] != fmt.Sprintf("chunk-%04d", n-1) {
		t.Errorf("before the load's answer the editor was replayed %d chunks, want the %d of the session's history", len(replayed), n)
	}
}
