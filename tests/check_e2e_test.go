package tests

// `acp-bridge check` end to end: the built binary checks the flawed agent
// as a child process and behind a WebSocket, and checks the bridge itself in
// front of every built-in backend with that backend's fake agent (this is
// the check-the-bridge run CI relies on).

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent/flawed"
	"github.com/acp-bridge/acp-bridge/toolkit/trace"
)

type checkReport struct {
	Failed  bool `json:"failed"`
	Results []struct {
		ID, Tier, Status, Reason string
	} `json:"results"`
}

func (r checkReport) status(id string) string {
	for _, x := range r.Results {
		if x.ID == id {
			return x.Status
		}
	}
	return "missing"
}

// runCheck runs `acp-bridge check --json ARGS` with env and returns the
// parsed report and the exit status.
func runCheck(t *testing.T, env []string, args ...string) (checkReport, int, string) {
	t.Helper()
	cmd := exec.Command(BridgeBin, append([]string{"check", "--json", "--timeout", "20s"}, args...)...)
	cmd.Env = hermeticEnv(t, env)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep checkReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("check --json output does not parse: %v\nstdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
	}
	return rep, code, out.String() + errb.String()
}

func selfExe(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

func TestCheck_FlawedChild(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	junit := filepath.Join(t.TempDir(), "check.xml")
	// The reference agent with its quirks: conformant behaviours, all of
	// which must pass (none skip).
	var quirks []string
	for _, q := range flawed.Quirks {
		quirks = append(quirks, string(q))
	}
	rep, code, out := runCheck(t, []string{"FAKE_AGENT=flawed", flawed.EnvDefects + "=" + strings.Join(quirks, ",")}, "--junit", junit, "--", exe)
	if code != 0 || rep.Failed {
		t.Fatalf("conformant flawed agent: exit %d\n%s", code, out)
	}
	for _, r := range rep.Results {
		if r.Status != "PASS" {
			t.Errorf("%s: %s %s", r.ID, r.Status, r.Reason)
		}
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var suites struct {
		Suite []struct {
			Tests int `xml:"tests,attr"`
			Cases []struct {
				Name string `xml:"name,attr"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &suites); err != nil || len(suites.Suite) != 1 || suites.Suite[0].Tests != len(rep.Results) {
		t.Fatalf("--junit: %v %+v\n%s", err, suites, b)
	}

	rep, code, out = runCheck(t, []string{"FAKE_AGENT=flawed", flawed.EnvDefects + "=" + string(flawed.WrongUnknownCode)},
		"--only", "unknown-method,initialize", "--", exe)
	if code != 1 || !rep.Failed || len(rep.Results) != 2 || rep.status("unknown-method") != "FAIL" || rep.status("initialize") != "PASS" {
		t.Fatalf("wrong-unknown-code: exit %d, want 1 with unknown-method FAIL\n%s", code, out)
	}
}

func TestCheck_FlawedWebSocket(t *testing.T) {
	t.Parallel()
	srv := flawed.NewWSServer(flawed.Set{flawed.StdoutNoise: true, flawed.SessionMethods: true})
	defer srv.Close()
	rep, code, out := runCheck(t, nil, "--url", srv.URL)
	if code != 1 || rep.status("stdout-purity") != "FAIL" {
		t.Fatalf("stdout-noise over ws: exit %d\n%s", code, out)
	}
	for _, r := range rep.Results {
		if r.ID != "stdout-purity" && r.Status != "PASS" {
			t.Errorf("%s: %s %s", r.ID, r.Status, r.Reason)
		}
	}
}

// TestCheck_Bridge checks the bridge in front of each built-in backend with
// its fake agent: no mandatory scenario may fail, and the scenarios each
// backend's fake can play must pass (not merely skip).
func TestCheck_Bridge(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	for _, b := range []struct {
		name    string
		env     []string
		bridge  []string // the bridge's flags
		prompts []string // check's prompt flags for this fake
		pass    []string // non-mandatory scenarios that must pass
		// fail are the mandatory scenarios the fake itself breaks: the
		// bridge relays the agent faithfully, no stricter than it.
		fail []string
	}{
		{name: "acp", env: []string{"FAKE_AGENT=flawed"},
			prompts: nil,
			pass:    []string{"set-mode", "client-requests", "cancel-permission", "concurrent-prompt", "reinitialize"}},
		// The SDK-based fake serves prompts for sessions it never created
		// (it keeps no session table); the relay passes that on.
		{name: "acp-sdk-fake", env: []string{"FAKE_AGENT=acp"},
			prompts: []string{"--long-prompt", "wait-cancel"},
			pass:    []string{"reinitialize", "session-close"},
			fail:    []string{"unknown-session"}},
		{name: "acp-v0", env: []string{"FAKE_AGENT=acp-v0"}, bridge: []string{"--dialect", "acp-v0"},
			prompts: []string{"--long-prompt", "slow", "--permission-prompt", "run echo please"},
			pass:    []string{"client-requests", "concurrent-prompt", "reinitialize"}},
		{name: "rules-agent-rpc", env: []string{"FAKE_AGENT=rules-agent-rpc"}, bridge: []string{"--dialect", "agent-rpc"},
			prompts: []string{"--long-prompt", "slow"},
			pass:    []string{"concurrent-prompt", "reinitialize"}},
		{name: "claude", env: []string{"FAKE_AGENT=claude"}, bridge: []string{"--dialect", "claude-stream-json"},
			prompts: []string{"--long-prompt", "slow", "--permission-prompt", "touch"},
			pass:    []string{"set-mode", "client-requests", "concurrent-prompt", "reinitialize"}},
	} {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			args := append(append([]string{}, b.prompts...), "--", BridgeBin)
			args = append(append(args, b.bridge...), "--", exe)
			rep, code, out := runCheck(t, b.env, args...)
			if want := min(len(b.fail), 1); code != want || rep.Failed != (want == 1) {
				t.Errorf("exit %d (failed %v), want %d", code, rep.Failed, want)
			}
			for _, r := range rep.Results {
				want := "PASS"
				if slices.Contains(b.fail, r.ID) {
					want = "FAIL"
				}
				if r.Tier == "mandatory" && r.Status != want {
					t.Errorf("%s: %s %s, want %s", r.ID, r.Status, r.Reason, want)
				}
			}
			for _, id := range b.pass {
				if s := rep.status(id); s != "PASS" {
					t.Errorf("%s: %s, want PASS", id, s)
				}
			}
			if t.Failed() {
				t.Logf("check output:\n%s", out)
			}
		})
	}
}

func TestCheck_Usage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check"}, "no agent"},
		{[]string{"check", "--url", "ws://x", "--", "agent"}, "not both"},
		{[]string{"check", "--only", "no-such", "--", "agent"}, "unknown scenario"},
		{[]string{"compare", "--a", "agent"}, "two agents and a prompt"},
		{[]string{"compare", "--a", "'agent", "--b", "b", "--prompt", "p"}, "unterminated"},
	} {
		cmd := exec.Command(BridgeBin, c.args...)
		cmd.Env = hermeticEnv(t, nil)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), c.want) {
			t.Errorf("%q: %v, want exit 2 saying %q\n%s", c.args, err, c.want, out)
		}
	}
}

// TestCheck_BridgeRepairOfADanglingPermission: in front of an agent that ends
// a cancelled turn without waiting for its permission request, the bridge
// withdraws the request with $/cancel_request before the turn's answer (ACP
// spec, $/cancel_request: the spec's own cascade). check must accept the
// repair the shim makes, not contradict it.
func TestCheck_BridgeRepairOfADanglingPermission(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	env := []string{"FAKE_AGENT=flawed", flawed.EnvDefects + "=" + string(flawed.DanglingPermission)}
	direct, _, out := runCheck(t, env, "--only", "cancel-permission", "--", exe)
	if s := direct.status("cancel-permission"); s != "FAIL" {
		t.Fatalf("directly: cancel-permission %s, want FAIL\n%s", s, out)
	}
	bridged, _, out := runCheck(t, env, "--only", "cancel-permission", "--", BridgeBin, "--", exe)
	if s := bridged.status("cancel-permission"); s != "PASS" {
		t.Fatalf("behind the bridge: cancel-permission %s, want PASS\n%s", s, out)
	}
}

// TestCheck_BridgeClosedSession: a session closed through the bridge
// takes no prompt until it is loaded or resumed, whatever the agent behind
// does with its side of it (the flawed agent's close-keeps-serving serves
// it; the SDK-based fake never forgets a session), so check's
// session-close passes behind the bridge on its own defaults.
func TestCheck_BridgeClosedSession(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	for _, env := range [][]string{
		{"FAKE_AGENT=flawed", flawed.EnvDefects + "=" + string(flawed.CloseKeepsServing)},
		{"FAKE_AGENT=acp"},
	} {
		bridged, _, out := runCheck(t, env, "--only", "session-close", "--", BridgeBin, "--", exe)
		if s := bridged.status("session-close"); s != "PASS" {
			t.Errorf("%q behind the bridge: session-close %s, want PASS\n%s", env, s, out)
		}
	}
}

// TestCheck_TraceDirNotThereYet: a --trace-dir that does not exist yet is
// made before the first acp-bridge under test starts, which would
// otherwise fail to open its trace there and exit (a false initialize
// failure).
func TestCheck_TraceDirNotThereYet(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	dir := filepath.Join(t.TempDir(), "not", "yet")
	rep, code, out := runCheck(t, []string{"FAKE_AGENT=flawed"}, "--trace-dir", dir,
		"--only", "initialize", "--", BridgeBin, "--no-sessions", "--", exe)
	if code != 0 || rep.status("initialize") != "PASS" {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if bridged, _ := filepath.Glob(filepath.Join(dir, "initialize.bridge-*.ndjson")); len(bridged) == 0 {
		t.Fatalf("no bridge trace in %s", dir)
	}
}

// TestCheck_ExitStatus: the exit status counts capability failures (an
// agent that sends relative paths or another session's id), and follows
// --fail-on and --baseline.
func TestCheck_ExitStatus(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	baseline := filepath.Join(t.TempDir(), "baseline")
	for _, d := range []flawed.Defect{flawed.RelativePaths, flawed.ForeignSession} {
		env := []string{"FAKE_AGENT=flawed", flawed.EnvDefects + "=" + string(d)}
		for _, c := range []struct {
			flags    []string
			baseline string
			want     int
		}{
			{nil, "", 1},
			{[]string{"--fail-on", "mandatory"}, "", 0},
			{nil, "client-requests # " + string(d), 0},
			{nil, "client-requests\nunknown-method # fixed long ago", 1},
		} {
			args := c.flags
			if c.baseline != "" {
				if err := os.WriteFile(baseline, []byte(c.baseline), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--baseline", baseline)
			}
			args = append(args, "--only", "client-requests,unknown-method", "--", exe)
			rep, code, out := runCheck(t, env, args...)
			if code != c.want || rep.status("client-requests") != "FAIL" {
				t.Errorf("%s %q baseline %q: exit %d, want %d\n%s", d, c.flags, c.baseline, code, c.want, out)
			}
		}
	}
}

// TestCheck_TraceDirKeepsEveryScenario: with --trace-dir, every scenario's
// transcript is kept as a trace, and each acp-bridge that check starts
// (one per scenario) writes its own trace beside it instead of all of
// them rewriting one file; --transcripts prints passing transcripts.
func TestCheck_TraceDirKeepsEveryScenario(t *testing.T) {
	t.Parallel()
	exe := selfExe(t)
	dir := t.TempDir()
	rep, code, out := runCheck(t, []string{"FAKE_AGENT=flawed"}, "--trace-dir", dir, "--transcripts",
		"--only", "prompt-stream,cancel", "--", BridgeBin, "--no-sessions", "--", exe)
	if code != 0 || rep.status("prompt-stream") != "PASS" || rep.status("cancel") != "PASS" {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if !strings.Contains(out, `acp-check/barrier`) { // only transcripts hold it
		t.Errorf("--transcripts: no transcript of the passing scenarios in the report\n%s", out)
	}
	for _, id := range []string{"prompt-stream", "cancel"} {
		own, err := trace.ReadFile(filepath.Join(dir, id+".ndjson"))
		if err != nil || !slices.ContainsFunc(own, func(r trace.Record) bool { return r.Method == "session/prompt" && r.Dir == "out" }) {
			t.Errorf("%s: check's own trace: %v, %d records", id, err, len(own))
		}
		bridged, _ := filepath.Glob(filepath.Join(dir, id+".bridge-*.ndjson"))
		if len(bridged) != 1 {
			t.Fatalf("%s: bridge traces %v, want one", id, bridged)
		}
		recs, err := trace.ReadFile(bridged[0])
		if err != nil || !slices.ContainsFunc(recs, func(r trace.Record) bool { return r.Method == "session/prompt" && r.Hop == "agent" }) {
			t.Errorf("%s: the bridge's trace %s: %v, %d records", id, bridged[0], err, len(recs))
		}
	}
}
