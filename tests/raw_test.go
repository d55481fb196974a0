package tests

// Raw-line tests: bytes in on stdin, exact lines out on stdout, against the
// fake agent as a child process. They pin the JSON-RPC edges an SDK client
// never exercises (framing, error codes, ids) and process hygiene.

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"
)

// silence is how long a raw test waits to be sure nothing more comes.
const silence = 300 * time.Millisecond

// startRaw starts a bridge with extra flags in front of a child fake agent,
// with no SDK attached.
func startRaw(t *testing.T, flags ...string) *Bridge {
	t.Helper()
	agent := ChildTransport("acp").Start(t)
	return StartBridge(t, append(flags, agent.Args...), agent.Env, nil)
}

const initParams = `{"protocolVersion":1,"clientCapabilities":{},"clientInfo":{"name":"raw","version":"0"}}`

// rawInit initializes with id "init" and checks the answer.
func rawInit(t *testing.T, b *Bridge) {
	t.Helper()
	b.WriteLine(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":` + initParams + `}`)
	l := b.Next(WaitTimeout)
	if l.ID() != `"init"` || !l.Get("result.protocolVersion").Exists() {
		t.Fatalf("initialize answer = %s", l)
	}
}

// rawNewSession opens a session and returns its id.
func rawNewSession(t *testing.T, b *Bridge, id string) string {
	t.Helper()
	b.WriteLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, id, t.TempDir()))
	l := b.Next(WaitTimeout)
	sid := l.Get("result.sessionId").Str
	if l.ID() != id || sid == "" {
		t.Fatalf("session/new answer = %s", l)
	}
	return sid
}

// wantError reads the next line and checks it is an error with code for
// the raw id.
func wantError(t *testing.T, b *Bridge, id string, code int) Line {
	t.Helper()
	l := b.Next(WaitTimeout)
	got, ok := l.ErrorCode()
	if !ok || got != code || l.ID() != id {
		t.Fatalf("got %s\nwant an error %d with id %s", l, code, id)
	}
	if l.Get("error.message").Str == "" {
		t.Errorf("error without a message: %s", l)
	}
	return l
}

// probe sends _test/echo with id "probe-N" and requires that the next line
// is its answer: whatever was written before it produced no output.
func probe(t *testing.T, b *Bridge, n int) {
	t.Helper()
	id := fmt.Sprintf(`"probe-%d"`, n)
	b.WriteLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"_test/echo","params":{"n":%d}}`, id, n))
	l := b.Next(WaitTimeout)
	if l.ID() != id || l.Get("result.n").Int() != int64(n) {
		t.Fatalf("got %s\nwant the answer to probe %s", l, id)
	}
}

func TestRaw_ParseErrorAnsweredWithNullID(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	b.WriteLine(`{"jsonrpc":"2.0","id":1,"method":`)
	wantError(t, b, "null", -32700)
	b.ExpectSilence(silence)
	rawInit(t, b) // still serving
	b.WriteLine(`not json at all`)
	wantError(t, b, "null", -32700)
	probe(t, b, 1)
}

func TestRaw_MissingMethodIsInvalidRequest(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	rawInit(t, b)
	b.WriteLine(`{"jsonrpc":"2.0","id":7}`)
	wantError(t, b, "7", -32600)
	b.WriteLine(`{"jsonrpc":"2.0","id":"x","method":42}`)
	wantError(t, b, `"x"`, -32600)
	probe(t, b, 1)
	b.ExpectSilence(silence)
}

func TestRaw_UnknownMethod(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	rawInit(t, b)
	b.WriteLine(`{"jsonrpc":"2.0","id":3,"method":"no/such_method","params":{}}`)
	wantError(t, b, "3", -32601)
	b.WriteLine(`{"jsonrpc":"2.0","id":"ext","method":"_no/such_extension","params":{}}`)
	wantError(t, b, `"ext"`, -32601)
	b.ExpectSilence(silence)
}

// Notifications never get an answer, not even an error (JSON-RPC 2.0).
func TestRaw_NotificationsUnanswered(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	rawInit(t, b)
	sid := rawNewSession(t, b, "1")
	for _, n := range []string{
		`{"jsonrpc":"2.0","method":"no/such_notification","params":{}}`,
		`{"jsonrpc":"2.0","method":"_unknown/extension_notification","params":{"a":1}}`,
		`{"jsonrpc":"2.0","method":"$/whatever"}`,
		`{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"never-sent"}}`,
		fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":%q}}`, sid),
		`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"no-such-session"}}`,
	} {
		b.WriteLine(n)
	}
	probe(t, b, 1)
	b.ExpectSilence(silence)
}

// Ids come back byte for byte: 0 is valid, 1 and "1" differ, numbers beyond
// 2^53 keep their digits, string escapes keep their spelling (ids are
// opaque; relays that rewrote them broke routing, supercorp-ai/supergateway
// #18, #35).
func TestRaw_IDsByteIdentical(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	b.WriteLine(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":` + initParams + `}`)
	if l := b.Next(WaitTimeout); l.ID() != "0" || !l.Get("result").Exists() {
		t.Fatalf("initialize with id 0 answered %s", l)
	}
	ids := []string{`0`, `"abc"`, `-5`, `9007199254740993`, `1`, `"1"`, `"\u00e9"`, `"a\"b"`, `""`}
	// All in flight at once: the bridge must keep them apart.
	for i, id := range ids {
		b.WriteLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"_test/echo","params":{"i":%d}}`, id, i))
	}
	got := make(map[int]string)
	for range ids {
		l := b.Next(WaitTimeout)
		got[int(l.Get("result.i").Int())] = l.ID()
	}
	for i, id := range ids {
		if got[i] != id {
			t.Errorf("request %d sent with id %s came back with id %s", i, id, got[i])
		}
	}
	// Errors made by the agent and by the bridge keep the id too.
	b.WriteLine(`{"jsonrpc":"2.0","id":9007199254740993,"method":"no/such_method"}`)
	wantError(t, b, "9007199254740993", -32601)
	b.WriteLine(`{"jsonrpc":"2.0","id":-5,"method":"session/prompt","params":"not an object"}`)
	if l := b.Next(WaitTimeout); l.ID() != "-5" {
		t.Errorf("invalid params answered with id %s, want -5: %s", l.ID(), l)
	}
	b.ExpectSilence(silence)
}

func TestRaw_BatchRejected(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	b.WriteLine(`[{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + initParams + `}]`)
	wantError(t, b, "null", -32600)
	b.ExpectSilence(silence) // and the batched initialize did not run
	rawInit(t, b)
}

// A request before initialize gets an error, not a hang, and the editor may
// still initialize afterwards (the TypeScript SDK's router answers such a
// request -32600 and keeps the connection open).
func TestRaw_RequestBeforeInitialize(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	b.WriteLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":%q,"mcpServers":[]}}`, t.TempDir()))
	l := b.Next(3 * time.Second)
	if _, ok := l.ErrorCode(); !ok || l.ID() != "1" {
		t.Fatalf("session/new before initialize answered %s, want an error with id 1", l)
	}
	rawInit(t, b)
	rawNewSession(t, b, "2")
}

// A 40 MiB prompt (a base64 image) reaches the agent intact (the
// TypeScript SDK allows 32 MiB; line limits are the commonest silent
// failure of relays).
func TestRaw_LargePrompt40MiB(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	rawInit(t, b)
	sid := rawNewSession(t, b, "1")
	raw := make([]byte, 30<<20)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	data := base64.StdEncoding.EncodeToString(raw) // 40 MiB
	params := fmt.Sprintf(`{"sessionId":%q,"prompt":[{"type":"image","mimeType":"image/png","data":"%s"},{"type":"text","text":"what is this?"}]}`, sid, data)
	b.WriteLine(`{"jsonrpc":"2.0","id":"big","method":"session/prompt","params":` + params + `}`)
	l := b.Next(60 * time.Second)
	if l.ID() != `"big"` {
		t.Fatalf("got %s, want the answer to the big prompt", l)
	}
	d := l.Get("result._meta.fake-agent")
	sum := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	if got := d.Get("imageBytes").Int(); got != int64(len(data)) {
		t.Errorf("agent got %d bytes of image data, want %d (answer %s)", got, len(data), l)
	}
	if d.Get("imageSha256").Str != sum(data) {
		t.Errorf("image data changed on the way to the agent")
	}
	if d.Get("paramsBytes").Int() != int64(len(params)) || d.Get("paramsSha256").Str != sum(params) {
		t.Errorf("prompt params changed on the way: agent got %d bytes, sent %d", d.Get("paramsBytes").Int(), len(params))
	}
}

// A line over --max-message is answered with an error and skipped; the
// bridge keeps serving, and a line under the limit still passes intact.
func TestRaw_OverMaxMessage(t *testing.T) {
	t.Parallel()
	b := startRaw(t, "--max-message", "1MiB")
	rawInit(t, b)
	b.WriteLine(`{"jsonrpc":"2.0","id":"too-big","method":"_test/echo","params":{"pad":"` + strings.Repeat("x", 2<<20) + `"}}`)
	l := b.Next(WaitTimeout)
	if _, ok := l.ErrorCode(); !ok || (l.ID() != `"too-big"` && l.ID() != "null") {
		t.Fatalf("over-limit line answered %s, want an error (id \"too-big\" or null)", l)
	}
	probe(t, b, 1)

	fits := `{"pad":"` + strings.Repeat("y", 900<<10) + `"}`
	b.WriteLine(`{"jsonrpc":"2.0","id":"fits","method":"_test/echo","params":` + fits + `}`)
	if l := b.Next(WaitTimeout); l.ID() != `"fits"` || l.Get("result").Raw != fits {
		t.Errorf("a 900 KiB message under the 1 MiB limit did not pass intact: %s", l)
	}

	// The over-limit line never reached the agent.
	b.WriteLine(`{"jsonrpc":"2.0","id":"j","method":"_test/journal"}`)
	jl := b.Next(WaitTimeout)
	for _, f := range jl.Get("result.frames").Array() {
		// The journal keeps frames over 64 KiB as "<N bytes sha256 …>".
		var n int
		if _, err := fmt.Sscanf(f.Str, "<%d bytes", &n); err == nil && n > 1<<20 || strings.Contains(f.Str, "too-big") {
			t.Errorf("the agent received the over-limit line: %s", truncate(f.Str, 200))
		}
	}
	b.ExpectSilence(silence)
}

func TestRaw_CRLFAndBlankLines(t *testing.T) {
	t.Parallel()
	b := startRaw(t)
	w := func(s string) {
		if _, err := b.In.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	w("\r\n\n   \n\t\r\n")
	w(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":` + initParams + "}\r\n")
	if l := b.Next(WaitTimeout); l.ID() != `"init"` || !l.Get("result").Exists() {
		t.Fatalf("CRLF initialize answered %s", l)
	}
	w("\n\r\n")
	w(`{"jsonrpc":"2.0","id":2,"method":"_test/echo","params":{"crlf":true}}` + "\r\n")
	if l := b.Next(WaitTimeout); l.ID() != "2" || l.Get("result").Raw != `{"crlf":true}` {
		t.Fatalf("CRLF echo answered %s", l)
	}
	b.ExpectSilence(silence)
}

// agentPID initializes and asks the child agent for its pid.
func agentPID(t *testing.T, b *Bridge) int {
	t.Helper()
	rawInit(t, b)
	b.WriteLine(`{"jsonrpc":"2.0","id":"info","method":"_test/info"}`)
	l := b.Next(WaitTimeout)
	pid := int(l.Get("result.pid").Int())
	if pid <= 0 || l.Get("result.transport").Str != "stdio" {
		t.Fatalf("_test/info answered %s", l)
	}
	if pid == b.cmd.Process.Pid || processGone(pid) {
		t.Fatalf("agent pid %d is not a live child", pid)
	}
	return pid
}

// Stdin EOF or SIGTERM: the bridge exits 0 within 3 s and leaves no agent
// process behind (orphaned children are a classic bridge bug).
func TestRaw_ShutdownLeavesNoAgent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		stop func(*Bridge)
	}{
		{"stdin-eof", func(b *Bridge) { b.In.Close() }},
		{"sigterm", func(b *Bridge) { b.Signal(syscall.SIGTERM) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := startRaw(t)
			pid := agentPID(t, b)
			start := time.Now()
			tc.stop(b)
			code, ok := b.WaitExit(3 * time.Second)
			if !ok {
				t.Fatalf("bridge still running 3 s after %s", tc.name)
			}
			if code != 0 {
				t.Errorf("bridge exited with status %d after %s, want 0", code, tc.name)
			}
			if !processGone(pid) {
				t.Errorf("agent process %d still running after the bridge exited (%v after %s)", pid, time.Since(start), tc.name)
				_ = killPID(pid)
			}
		})
	}
	t.Run("stdin-eof-before-initialize", func(t *testing.T) {
		t.Parallel()
		b := startRaw(t)
		b.In.Close()
		if code, ok := b.WaitExit(3 * time.Second); !ok || code != 0 {
			t.Errorf("bridge with no agent: exited=%v status %d after stdin EOF, want 0 within 3 s", ok, code)
		}
	})
}

// A line of 6,000,000 "[" (6 MB, far under the size limit), from the editor
// or as a frame from the agent, used to overflow the goroutine stack in a
// recursive validator: a fatal error, pending requests never answered. Now
// the editor's is answered -32700 naming the nesting, the agent's is logged
// and dropped, and the bridge keeps serving both.
func TestRaw_DeepNesting(t *testing.T) {
	t.Parallel()
	RunTransports(t, []Transport{ChildTransport("acp"), WSTransport(nil)}, func(t *testing.T, tr Transport) {
		agent := tr.Start(t)
		b := StartBridge(t, agent.Args, agent.Env, nil)
		b.WriteLine(strings.Repeat("[", 6_000_000))
		l := wantError(t, b, "null", -32700)
		if !strings.Contains(l.Get("error.message").Str, "nested deeper") {
			t.Errorf("deep line answered %s", l)
		}
		rawInit(t, b)
		sid := rawNewSession(t, b, "1")
		b.WriteLine(fmt.Sprintf(`{"jsonrpc":"2.0","id":"deep","method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"deep"}]}}`, sid))
		chunk := b.Next(WaitTimeout)
		if chunk.Get("params.update.content.text").Str != "after-deep" {
			t.Fatalf("after the agent's deep frame the editor got %s, want the chunk after it", chunk)
		}
		if l := b.Next(WaitTimeout); l.ID() != `"deep"` || l.Get("result.stopReason").Str != "end_turn" {
			t.Errorf("prompt answered %s", l)
		}
		probe(t, b, 1)
	})
}
