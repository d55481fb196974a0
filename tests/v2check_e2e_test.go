package tests

// `acp-bridge check --protocol 2` end to end: the built binary checks the
// v2 agent written with the official SDK (testdata/sdkagentv2), compliant
// and with each defect its SDK_AGENT_V2_DEFECTS seeds.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// v2CheckArgs are the check flags for the SDK v2 agent: its "slow" prompt
// streams until cancelled.
var v2CheckArgs = []string{"--protocol", "2", "--long-prompt", "slow", "--permission-prompt", "tool", "--cancel-after", "2s"}

func TestCheckV2_SDKAgent(t *testing.T) {
	t.Parallel()
	agent := NodeScript(t, sdkAgentV2Script)
	rep, code, out := runCheck(t, nil, append(v2CheckArgs, append([]string{"--"}, agent...)...)...)
	if code != 0 || rep.Failed {
		t.Fatalf("compliant SDK v2 agent: exit %d\n%s", code, out)
	}
	notApplicable := map[string]bool{"set-mode": true, "client-requests": true}
	for _, r := range rep.Results {
		switch {
		case notApplicable[r.ID]:
			if r.Status != "SKIP" || !strings.Contains(r.Reason, "not applicable to ACP v2") {
				t.Errorf("%s: %s %q, want SKIP as not applicable to ACP v2", r.ID, r.Status, r.Reason)
			}
		case r.Status != "PASS":
			t.Errorf("%s: %s %s", r.ID, r.Status, r.Reason)
		}
	}
	for _, id := range []string{"initialize", "prompt-stream", "prompt-echo", "stop-reason", "cancel", "cancel-permission", "concurrent-prompt", "unknown-method", "notification", "unknown-session", "schema"} {
		if rep.status(id) != "PASS" {
			t.Errorf("scenario %s: %s, want PASS", id, rep.status(id))
		}
	}
}

func TestCheckV2_SeededDefects(t *testing.T) {
	t.Parallel()
	agent := NodeScript(t, sdkAgentV2Script)
	for _, tc := range []struct {
		defect string
		only   string
		fails  map[string]string // scenario → what its reason must say
		exit   int               // 0 when only advisory scenarios fail
	}{
		// A stop reason is a SHOULD (advisory), "cancelled" after a
		// cancel a MUST (mandatory: the run fails on it).
		{"no-stop-reason", "prompt-stream,stop-reason,cancel", map[string]string{
			"stop-reason": "params.update.stopReason of the idle state_update is nothing",
			"cancel":      "params.update.stopReason of the idle state_update after session/cancel is nothing, want \"cancelled\"",
		}, 1},
		// v2 agents must echo the prompt under the acknowledgement's
		// messageId (a MUST: the run fails on it).
		{"no-echo", "prompt-stream,prompt-echo", map[string]string{
			"prompt-echo": "no user_message or user_message_chunk with messageId",
		}, 1},
		{"answer-notification", "notification,unknown-method", map[string]string{
			"notification": "a notification was answered",
		}, 1},
		{"invalid-update", "prompt-stream,schema", map[string]string{
			"schema": "session/update params: update.content: want object, got string",
		}, 1},
		// Advisory: reported, and the run still passes.
		{"overlap", "concurrent-prompt,prompt-stream", map[string]string{
			"concurrent-prompt": "streamed in turn: the second prompt ran alongside the first",
		}, 0},
		{"preempt", "concurrent-prompt,prompt-stream", map[string]string{
			"concurrent-prompt": "the agent preempted the running turn for the second prompt",
		}, 0},
	} {
		t.Run(tc.defect, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{"--only", tc.only}, v2CheckArgs...), "--")
			rep, code, out := runCheck(t, []string{"SDK_AGENT_V2_DEFECTS=" + tc.defect}, append(args, agent...)...)
			if code != tc.exit || rep.Failed != (tc.exit == 1) {
				t.Fatalf("exit %d, want %d\n%s", code, tc.exit, out)
			}
			for _, r := range rep.Results {
				want, bad := tc.fails[r.ID]
				switch {
				case bad && r.Status != "FAIL":
					t.Errorf("%s: %s %s, want FAIL", r.ID, r.Status, r.Reason)
				case bad && !strings.Contains(r.Reason, want):
					t.Errorf("%s: reason %q does not say %q", r.ID, r.Reason, want)
				case !bad && r.Status != "PASS":
					t.Errorf("%s: %s %s, want PASS: the defect is not there", r.ID, r.Status, r.Reason)
				}
			}
			if len(rep.Results) != strings.Count(tc.only, ",")+1 {
				t.Errorf("%d results for --only %s\n%s", len(rep.Results), tc.only, out)
			}
		})
	}
}

// The bridge as a v2 editor's agent, in front of the v1 flawed agent,
// passes check --protocol 2; its trace's page says which version each hop
// speaks.
func TestCheckV2_BridgeFrontTrace(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	path := filepath.Join(t.TempDir(), "trace.ndjson")
	rep, code, out := runCheck(t, []string{"FAKE_AGENT=flawed"}, "--protocol", "2", "--long-prompt", "wait-cancel", "--",
		BridgeBin, "--editor-protocol", "2", "--trace", path, "--trace-append", "--", exe)
	if code != 0 || rep.Failed {
		t.Fatalf("the bridge as a v2 front: exit %d\n%s", code, out)
	}
	for _, r := range rep.Results {
		if r.Status != "PASS" && !strings.Contains(r.Reason, "not applicable to ACP v2") {
			t.Errorf("%s: %s %s", r.ID, r.Status, r.Reason)
		}
	}
	page := path + ".html"
	if b, err := exec.Command(BridgeBin, "trace", "view", path, "-o", page).CombinedOutput(); err != nil {
		t.Fatalf("trace view: %v\n%s", err, b)
	}
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"editor hop ACP 2, agent hop ACP 1", "agent hop (link 1) answered ACP 1"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the trace's page does not say %q", want)
		}
	}
}
