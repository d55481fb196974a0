package check

import (
	"bytes"
	"context"
	"encoding/xml"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent/flawed"
)

// flawedDialer serves the flawed agent in process with set.
func flawedDialer(set flawed.Set) Dialer {
	return Pipe{Name: "flawed " + set.String(), Serve: func(in io.Reader, out io.Writer) error {
		return flawed.Serve(in, out, set)
	}}
}

func testOptions(d Dialer) Options {
	return Options{Dialer: d, Timeout: 5 * time.Second, Quiet: 100 * time.Millisecond, CancelAfter: 2 * time.Second}
}

func runCheck(t *testing.T, o Options) *Report {
	t.Helper()
	rep, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func dump(rep *Report) string {
	var b bytes.Buffer
	rep.WriteText(&b)
	return b.String()
}

func TestCheck_ConformantAgentPassesAll(t *testing.T) {
	rep := runCheck(t, testOptions(flawedDialer(nil)))
	if len(rep.Results) != len(scenarios) {
		t.Fatalf("%d results for %d scenarios", len(rep.Results), len(scenarios))
	}
	for _, r := range rep.Results {
		if r.Status != Pass {
			t.Errorf("%s: %s %s", r.ID, r.Status, r.Reason)
		}
	}
	if rep.Failed() || t.Failed() {
		t.Fatalf("report:\n%s", dump(rep))
	}
}

// defectFails is, for each defect of the flawed agent alone, every scenario
// that must not pass and its status; every other scenario must pass.
var defectFails = map[flawed.Defect]map[string]Status{
	flawed.NoReinit:              {"reinitialize": Fail},
	flawed.AnswerNotifications:   {"notification": Fail, "schema": Fail},
	flawed.NullIDResponses:       {"schema": Fail},
	flawed.MissingJSONRPC:        {"schema": Fail},
	flawed.ResultAndError:        {"prompt-stream": Fail, "cancel": Fail, "schema": Fail},
	flawed.StdoutNoise:           {"stdout-purity": Fail},
	flawed.StringProtocolVersion: {"initialize": Fail, "schema": Fail},
	flawed.BadProtocolVersion:    {"initialize": Fail},
	flawed.SnakeCase: {"session-new": Fail, "schema": Fail,
		// Without a sessionId nothing session-bound can run.
		"prompt-stream": NotRun, "cancel": NotRun, "cancel-permission": NotRun, "concurrent-prompt": NotRun,
		"set-mode": NotRun, "client-requests": NotRun},
	flawed.AtTypeUpdates:            {"schema": Fail},
	flawed.CanceledSpelling:         {"cancel": Fail, "schema": Fail},
	flawed.EndTurnAfterCancel:       {"cancel": Fail},
	flawed.IgnoreCancel:             {"cancel": Fail, "cancel-permission": Fail},
	flawed.LateUpdates:              {"prompt-stream": Fail, "cancel": Fail},
	flawed.EarlyUpdates:             {"session-new": Fail},
	flawed.DanglingPermission:       {"cancel-permission": Fail},
	flawed.UnstableVariants:         {"schema": Fail},
	flawed.UnsupportedClientMethods: {"client-requests": Fail},
	flawed.NullResults:              {"set-mode": Fail, "schema": Fail},
	flawed.WrongUnknownCode:         {"unknown-method": Fail},
	flawed.NoParseError:             {"malformed-json": Fail},
	flawed.DiesOnGarbage:            {"malformed-json": Fail},
	flawed.ConcurrentPrompts:        {"concurrent-prompt": Fail},
	flawed.RelativePaths:            {"client-requests": Fail},
	flawed.ForeignSession:           {"client-requests": Fail},
	flawed.SchemaViolation:          {"schema": Fail},
	flawed.UnknownSessionOK:         {"unknown-session": Fail},
}

func TestCheck_EachDefectFailsItsScenarios(t *testing.T) {
	if got, want := slices.Sorted(maps.Keys(defectFails)), slices.Sorted(slices.Values(flawed.All)); !slices.Equal(got, want) {
		t.Fatalf("defect table covers %v, the flawed agent has %v", got, want)
	}
	for _, d := range flawed.All {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			rep := runCheck(t, testOptions(flawedDialer(flawed.Set{d: true})))
			want := defectFails[d]
			for _, r := range rep.Results {
				w, ok := want[r.ID]
				if !ok {
					w = Pass
				}
				if r.Status != w {
					t.Errorf("%s: %s (%s), want %s", r.ID, r.Status, r.Reason, w)
				}
				if r.Duration <= 0 {
					t.Errorf("%s: duration %v", r.ID, r.Duration)
				}
				if r.Status == Fail && len(r.Transcript) == 0 {
					t.Errorf("%s: FAIL without transcript lines", r.ID)
				}
			}
			if !rep.Failed() && slices.ContainsFunc(rep.Results, Result.Failed) {
				t.Error("Report.Failed disagrees with its results")
			}
			if t.Failed() {
				t.Logf("report:\n%s", dump(rep))
			}
		})
	}
}

func TestCheck_SchemaFailureNamesTheField(t *testing.T) {
	o := testOptions(flawedDialer(flawed.Set{flawed.SchemaViolation: true}))
	o.Only = []string{"schema"}
	rep := runCheck(t, o)
	if r := rep.Results[0]; r.Status != Fail || !strings.Contains(r.Reason, "params.update.content: want object, got string") {
		t.Fatalf("schema: %s %q", r.Status, r.Reason)
	}
}

func TestCheck_OnlyAndUnknownScenario(t *testing.T) {
	o := testOptions(flawedDialer(nil))
	o.Only = []string{"unknown-method", "initialize"}
	rep := runCheck(t, o)
	if len(rep.Results) != 2 || rep.Results[0].ID != "initialize" || rep.Results[1].ID != "unknown-method" {
		t.Fatalf("--only ran %+v", rep.Results)
	}
	o.Only = []string{"no-such"}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "unknown scenario") {
		t.Fatalf("unknown scenario: %v", err)
	}
}

func TestCheck_JUnitParses(t *testing.T) {
	rep := runCheck(t, testOptions(flawedDialer(flawed.Set{flawed.SnakeCase: true})))
	var b bytes.Buffer
	if err := rep.WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Suites []struct {
			Tests    int `xml:"tests,attr"`
			Failures int `xml:"failures,attr"`
			Errors   int `xml:"errors,attr"`
			Cases    []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Error   *struct{} `xml:"error"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, b.String())
	}
	s := doc.Suites[0]
	if s.Tests != len(scenarios) || len(s.Cases) != len(scenarios) || s.Failures != 2 || s.Errors != 2 {
		t.Fatalf("suite tests=%d cases=%d failures=%d errors=%d\n%s", s.Tests, len(s.Cases), s.Failures, s.Errors, b.String())
	}
	for _, c := range s.Cases {
		if c.Name == "session-new" && c.Failure == nil {
			t.Errorf("session-new has no <failure>")
		}
	}
}
