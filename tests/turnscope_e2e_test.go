package tests

// A made-up chat protocol of the kind rule profiles' turn scope is for
// (the client picks a chat id per prompt, the stop names it, the agent
// numbers tool uses per chat and acknowledges or refuses a stop), bridged
// by a profile file (testdata/chatwire.hcl, loaded with --profile) through
// the built binary, driven by acp-go-sdk's client. The fake server
// (fakerules.Chatwire) refuses a reused chat id and a stop naming a chat
// that is not running, so a profile that cannot refer to its turn fails
// here.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
	fakerules "github.com/acp-bridge/acp-bridge/tests/fakeagent/rules"
)

func chatwireEditor(t *testing.T) *Editor {
	t.Helper()
	e := NewEditor(t, WSTransport(fakerules.Chatwire), EditorOptions{Args: []string{
		"--profile", "testdata/chatwire.hcl", "--no-sessions", "--log-level", "debug"}})
	e.Initialize(t)
	return e
}

// cancelTurn starts a prompt, waits for its first update, cancels it and
// returns its answer line.
func cancelTurn(t *testing.T, e *Editor, sid acp.SessionId, text string) Line {
	t.Helper()
	before, _ := updates(e, sid, -1)
	prev := e.In.LastID("session/prompt")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.Prompt(context.Background(), sid, text)
	}()
	waitFor(t, "the prompt's first update", func() bool {
		got, _ := updates(e, sid, -1)
		return e.In.LastID("session/prompt") != prev && len(got) > len(before)
	})
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	resp := e.Out.Response(t, e.In.LastID("session/prompt"))
	<-done
	return resp
}

// stderrLine waits for a line of the bridge's log holding every one of parts.
func stderrLine(t *testing.T, e *Editor, what string, parts ...string) string {
	t.Helper()
	var found string
	waitFor(t, what, func() bool {
		for _, l := range strings.Split(e.Bridge.Stderr(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(l, p)
			}
			if ok {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

func TestTurnScope_Chatwire(t *testing.T) {
	t.Parallel()
	e := chatwireEditor(t)
	sid := e.NewSession(t, t.TempDir())

	// The exact frame the agent got: a chat id made of the session's id and
	// the request counter.
	resp, got := turn(t, e, sid, "echo")
	if len(got) != 1 || !strings.Contains(got[0], `{"type":"chat","chat_id":"`+string(sid)+`-`) {
		t.Fatalf("echo turn: %s, updates %q", resp, got)
	}

	// Streamed, then two turns with a tool call each: the agent calls both
	// u1, the editor must see two ids.
	resp, got = turn(t, e, sid, "hello there")
	wantTurn(t, "hello", resp, got, []string{"message You said: ", "message hello there"})
	var ids []string
	for i := range 2 {
		_, before := updates(e, sid, -1)
		resp, got = turn(t, e, sid, "tool")
		wantTurn(t, "tool", resp, got, []string{"tool_call in_progress search", "tool_call_update completed", "message Found it"})
		_, after := updates(e, sid, resp.N)
		turnIDs := after[len(before):]
		if len(turnIDs) != 2 || turnIDs[0] != turnIDs[1] {
			t.Fatalf("tool turn %d: toolCallIds %q, want one id for the call and its update", i, turnIDs)
		}
		ids = append(ids, turnIDs[0])
	}
	if ids[0] == ids[1] {
		t.Errorf("both turns' tool calls have toolCallId %q; editors merge them", ids[0])
	}

	// A cancel the agent accepts: the stop names the running chat, the
	// agent acknowledges it, the prompt ends cancelled, and the final frame
	// the agent sends after its acknowledgement does not reach the editor.
	resp = cancelTurn(t, e, sid, "slow")
	if r := resp.Get("result.stopReason").Str; r != "cancelled" {
		t.Fatalf("accepted cancel: answered %s, want stopReason cancelled", resp)
	}
	stderrLine(t, e, "the acknowledged stop", "agent acknowledged the stop", "session="+string(sid))

	// A cancel the agent refuses: answered cancelled, no update after the
	// answer although the agent goes on, the refusal at WARN in its words.
	resp = cancelTurn(t, e, sid, "stubborn")
	if r := resp.Get("result.stopReason").Str; r != "cancelled" {
		t.Fatalf("refused cancel: answered %s, want stopReason cancelled", resp)
	}
	stderrLine(t, e, "the WARN line for the refused stop", "[WARN]", "refused the cancel", "is busy")
	time.Sleep(300 * time.Millisecond) // the agent's 20 late deltas and tool use
	if all, _ := updates(e, sid, -1); true {
		before, _ := updates(e, sid, resp.N)
		if late := all[len(before):]; len(late) > 0 {
			t.Errorf("%d updates after the cancelled answer, want none: %q", len(late), late)
		}
	}

	// A stop the agent takes without a word: after the cancel block's grace
	// (2 s) the prompt is answered cancelled and the log says so at WARN;
	// what the agent sends later is dropped.
	resp = cancelTurn(t, e, sid, "deaf")
	if r := resp.Get("result.stopReason").Str; r != "cancelled" {
		t.Fatalf("unacknowledged cancel: answered %s, want stopReason cancelled", resp)
	}
	stderrLine(t, e, "the WARN line for the unacknowledged stop", "[WARN]", "did not acknowledge the stop", "session="+string(sid), "within 2s")

	// A late frame of an earlier turn, sent at the start of the next one,
	// is dropped rather than shown in it.
	resp, got = turn(t, e, sid, "linger")
	wantTurn(t, "linger", resp, got, []string{"message first"})
	resp, got = turn(t, e, sid, "hello again")
	wantTurn(t, "the turn after linger", resp, got, []string{"message You said: ", "message hello again"})
	stderrLine(t, e, "the dropped late frame", "drained-turn-updates", "late from an earlier chat")
	// The deaf agent's late frame (3 s after the stop) has come and gone.
	stderrLine(t, e, "the deaf turn's late frame dropped", "drained-turn-updates", `\"text\":\"late\"}`)
	if all, _ := updates(e, sid, -1); slices.Contains(all, "message late") {
		t.Errorf("a frame the deaf agent sent after the cancelled answer reached the editor: %q", all)
	}

	// And the agent's error frame fails the prompt in its words.
	resp, _ = turn(t, e, sid, "fail")
	if msg := resp.Get("error.message").Str; !strings.Contains(msg, "chatwire: out of credits") {
		t.Errorf("fail turn answered %s; want an error naming the agent's message", resp)
	}
	if log := e.Bridge.Stderr(); strings.Contains(log, "matched no rule") {
		t.Errorf("a frame of the agent matched no rule of the profile:\n%s", log)
	}
}

// A cancel block with ack and no grace gives the agent the engine's cancel
// grace (--cancel-grace), not 5 s, to acknowledge a stop: the deaf agent's
// stop is reported unacknowledged after 1 s.
func TestTurnScope_CancelGraceFollowsEngine(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("testdata/chatwire.hcl")
	if err != nil {
		t.Fatal(err)
	}
	noGrace := strings.Replace(string(src), "  grace = \"2s\"\n", "", 1)
	if noGrace == string(src) {
		t.Fatal("testdata/chatwire.hcl has no grace line to remove")
	}
	file := filepath.Join(t.TempDir(), "chatwire.hcl")
	if err := os.WriteFile(file, []byte(noGrace), 0o644); err != nil {
		t.Fatal(err)
	}
	e := NewEditor(t, WSTransport(fakerules.Chatwire), EditorOptions{Args: []string{
		"--profile", file, "--no-sessions", "--cancel-grace", "1s", "--log-level", "debug"}})
	e.Initialize(t)
	sid := e.NewSession(t, t.TempDir())
	resp := cancelTurn(t, e, sid, "deaf")
	if r := resp.Get("result.stopReason").Str; r != "cancelled" {
		t.Fatalf("unacknowledged cancel: answered %s, want stopReason cancelled", resp)
	}
	stderrLine(t, e, "the WARN line for the unacknowledged stop", "[WARN]", "did not acknowledge the stop", "session="+string(sid), "within 1s")
}

// Two sessions on one connection, prompts running at once: the agent's
// frames name only the chat, and each reaches its own session.
func TestTurnScope_SharedConnection(t *testing.T) {
	t.Parallel()
	e := chatwireEditor(t)
	a, b := e.NewSession(t, t.TempDir()), e.NewSession(t, t.TempDir())
	slow := make(chan acp.PromptResponse, 1)
	go func() {
		r, _ := e.Prompt(context.Background(), a, "slow")
		slow <- r
	}()
	waitFor(t, "the slow prompt's first update", func() bool {
		got, _ := updates(e, a, -1)
		return len(got) > 0
	})
	resp, got := turn(t, e, b, "hello from b")
	wantTurn(t, "session b", resp, got, []string{"message You said: ", "message hello from b"})
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: a}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-slow:
		if r.StopReason != acp.StopReasonCancelled {
			t.Errorf("session a's prompt ended %q, want cancelled", r.StopReason)
		}
	case <-time.After(WaitTimeout):
		t.Fatal("session a's cancelled prompt was not answered")
	}
	if got, _ := updates(e, a, -1); !slices.Equal(got, []string{"message working"}) {
		t.Errorf("session a's updates %q, want only its own", got)
	}
}

// doctor --profile FILE --prompt TEXT runs one turn through the profile
// file against the agent and reports its end.
func TestTurnScope_Doctor(t *testing.T) {
	t.Parallel()
	s := StartWSAgent(t, fakeagent.WSOptions{Serve: fakerules.Chatwire})
	cmd := exec.Command(BridgeBin, "doctor", "--profile", "testdata/chatwire.hcl", "--url", s.URL, "--prompt", "hello doctor")
	cmd.Env = hermeticEnv(t, nil)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "end of turn (end_turn)") {
		t.Errorf("doctor: %v\n%s", err, out)
	}
}
