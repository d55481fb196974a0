package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent/flawed"
)

// runCompare runs `acp-bridge compare ARGS` and returns stdout and the
// exit status.
func runCompare(t *testing.T, env []string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(BridgeBin, append([]string{"compare", "--timeout", "20s", "--cancel-after", "300ms"}, args...)...)
	cmd.Env = hermeticEnv(t, env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		if ee.ExitCode() == 2 {
			t.Fatalf("usage error:\n%s", errb.String())
		}
		return out.String(), ee.ExitCode()
	}
	t.Fatal(err)
	return "", 0
}

type compareJSON struct {
	A, B struct {
		Turns []struct {
			StopReason string `json:"stop_reason"`
			Events     []string
		}
	}
	Differences []struct{ Area, A, B string }
}

func TestCompare_CLI(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	env := []string{"FAKE_AGENT=flawed"}
	prompts := []string{"--prompt", "hello", "--prompt", "Ask for permission, then go on", "--prompt", "!cancel wait-cancel"}

	// The same agent twice, once bridged: no difference, --exit-code 0.
	bridged := BridgeBin + " --no-sessions -- " + exe // the store would add loadSession
	out, code := runCompare(t, env, append([]string{"--json", "--exit-code", "--a", exe, "--b", bridged}, prompts...)...)
	var c compareJSON
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("--json does not parse: %v\n%s", err, out)
	}
	if code != 0 || len(c.Differences) != 0 || len(c.A.Turns) != 3 || len(c.B.Turns) != 3 || c.B.Turns[2].StopReason != "cancelled" {
		t.Fatalf("native vs bridged: exit %d\n%s", code, out)
	}

	// One known difference, over a WebSocket: exactly the stop reason.
	srv := flawed.NewWSServer(flawed.Set{flawed.CanceledSpelling: true})
	defer srv.Close()
	out, code = runCompare(t, env, append([]string{"--json", "--exit-code", "--a", exe, "--b", srv.URL}, prompts...)...)
	c = compareJSON{}
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("--json does not parse: %v\n%s", err, out)
	}
	if code != 1 || len(c.Differences) != 1 || c.Differences[0].A != "cancelled" || c.Differences[0].B != "canceled" {
		t.Fatalf("canceled-spelling: exit %d, want 1 and one stopReason difference\n%s", code, out)
	}

	// Without --exit-code a difference is reported, not a failure.
	out, code = runCompare(t, env, "--a", exe, "--b", srv.URL, "--prompt", "!cancel wait-cancel")
	if code != 0 || !bytes.Contains([]byte(out), []byte("1 difference(s)")) {
		t.Fatalf("without --exit-code: exit %d\n%s", code, out)
	}
}

// TestCompare_BrokenAgentsNeverPass: two agents that cannot be played
// (they exit at once, identically) are not "no differences": --exit-code
// fails and the text says nothing was compared.
func TestCompare_BrokenAgentsNeverPass(t *testing.T) {
	t.Parallel()
	falseBin, err := exec.LookPath("false")
	if err != nil {
		t.Fatal(err)
	}
	out, code := runCompare(t, nil, "--exit-code", "--a", falseBin, "--b", falseBin, "--prompt", "hello")
	if code != 1 || strings.Contains(out, "\nno differences\n") || !strings.Contains(out, "could not be played to the end") {
		t.Fatalf("--a false --b false --exit-code: exit %d, want 1 and no \"no differences\"\n%s", code, out)
	}
	out, code = runCompare(t, nil, "--json", "--exit-code", "--a", falseBin, "--b", falseBin, "--prompt", "hello")
	var c struct{ Incomplete bool }
	if err := json.Unmarshal([]byte(out), &c); err != nil || code != 1 || !c.Incomplete {
		t.Fatalf("--json: exit %d, incomplete %v (%v)\n%s", code, c.Incomplete, err, out)
	}
}
