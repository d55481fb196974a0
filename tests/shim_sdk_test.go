package tests

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
)

// sdkDefects are the flawed agent's defects an acp-go-sdk editor trips over,
// all at once: a realistic broken agent.
const sdkDefects = "missing-jsonrpc,answer-notifications,null-id-responses,stdout-noise," +
	"string-protocol-version,snake-case,late-updates,early-updates,unstable-variants," +
	"null-results,end-turn-after-cancel"

// sdkScript is what an acp-go-sdk editor does with an agent: initialize, a
// session, a prompt, a mode change, a cancelled prompt. It returns "" when
// every step went as against a compliant agent, else the first failure.
func sdkScript(t *testing.T, e *Editor) string {
	ctx := ctxT(t)
	if _, err := e.Conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		return "initialize: " + err.Error()
	}
	s, err := e.Conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil || s.SessionId == "" {
		return fmt.Sprintf("session/new: %q, %v", s.SessionId, err)
	}
	res, err := e.Prompt(ctx, s.SessionId, "hi")
	if err != nil || res.StopReason != acp.StopReasonEndTurn {
		return fmt.Sprintf("prompt: %+v, %v", res, err)
	}
	// (late-updates: the afterthought the agent sends after its answer
	// is written before the answer by the shim, so it may follow these.)
	if c := e.Fake.Chunks(s.SessionId); len(c) < 3 || !slices.Equal(c[:3], []string{"Hello", ", ", "world."}) {
		return fmt.Sprintf("chunks %q", c)
	}
	if _, err := e.Conn.SetSessionMode(ctx, acp.SetSessionModeRequest{SessionId: s.SessionId, ModeId: "plan"}); err != nil {
		return "session/set_mode: " + err.Error()
	}
	done := make(chan acp.PromptResponse, 1)
	go func() {
		r, _ := e.Prompt(ctx, s.SessionId, "wait-cancel")
		done <- r
	}()
	time.Sleep(100 * time.Millisecond)
	if err := e.Conn.Cancel(ctx, acp.CancelNotification{SessionId: s.SessionId}); err != nil {
		return "cancel: " + err.Error()
	}
	select {
	case r := <-done:
		if r.StopReason != acp.StopReasonCancelled {
			return fmt.Sprintf("cancelled prompt ended %q", r.StopReason)
		}
	case <-ctx.Done():
		return "cancelled prompt never answered"
	}
	for _, u := range e.Fake.Updates(s.SessionId) {
		if u.Update.AgentMessageChunk != nil && u.Update.AgentMessageChunk.Content.Text == nil {
			return "a chunk without a text content block"
		}
	}
	return ""
}

func flawedTransport(defects string) Transport {
	return Transport{Name: "child", Start: func(t *testing.T) Agent {
		a := ChildTransport("flawed").Start(t)
		a.Env = append(a.Env, "FLAWED_DEFECTS="+defects)
		return a
	}}
}

// An acp-go-sdk editor in front of an agent with a dozen defects at once
// sees a compliant agent through the shim, and does not with --shim off.
func TestShim_SDKEditorSeesCompliantAgent(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		e := NewEditor(t, flawedTransport(sdkDefects), EditorOptions{})
		if bad := sdkScript(t, e); bad != "" {
			t.Errorf("through the shim: %s", bad)
		}
		// Under stdout-noise's limit, the agent's log lines were skipped.
		if !strings.Contains(e.Stderr(), "skipping non-JSON line") {
			t.Errorf("the agent's stdout noise was not logged")
		}
	})
	t.Run("off", func(t *testing.T) {
		e := NewEditor(t, flawedTransport(sdkDefects), EditorOptions{Args: []string{"--shim", "off"}})
		if bad := sdkScript(t, e); bad == "" {
			t.Errorf("with --shim off the SDK editor saw no defect")
		}
		e.Out.TakeProblems()
	})
}
