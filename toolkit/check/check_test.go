package check

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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

// dump is what WriteText writes of a Report or a Comparison.
func dump(x interface{ WriteText(io.Writer) error }) string {
	var b bytes.Buffer
	x.WriteText(&b)
	return b.String()
}

func TestCheck_ConformantAgentPassesAll(t *testing.T) {
	set := flawed.Set{}
	for _, q := range flawed.Quirks {
		set[q] = true // conformant too: they must fail nothing
	}
	rep := runCheck(t, testOptions(flawedDialer(set)))
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
	flawed.MissingJSONRPC:        {"prompt-stream": Fail, "schema": Fail},
	flawed.ResultAndError:        {"prompt-stream": Fail, "cancel": Fail, "session-resume": Fail, "schema": Fail},
	flawed.StdoutNoise:           {"stdout-purity": Fail},
	flawed.StringProtocolVersion: {"initialize": Fail, "schema": Fail},
	flawed.BadProtocolVersion:    {"initialize": Fail},
	flawed.SnakeCase: {"session-new": Fail, "schema": Fail,
		// Without a sessionId nothing session-bound can run.
		"prompt-stream": NotRun, "cancel": NotRun, "cancel-permission": NotRun, "concurrent-prompt": NotRun,
		"set-mode": NotRun, "client-requests": NotRun,
		"session-load": NotRun, "session-resume": NotRun, "session-list": NotRun, "session-close": NotRun},
	flawed.AtTypeUpdates:            {"prompt-stream": Fail, "schema": Fail},
	flawed.CanceledSpelling:         {"cancel": Fail, "schema": Fail},
	flawed.EndTurnAfterCancel:       {"cancel": Fail},
	flawed.IgnoreCancel:             {"cancel": Fail, "cancel-permission": Fail},
	flawed.LateUpdates:              {"prompt-stream": Fail, "cancel": Fail},
	flawed.EarlyUpdates:             {"session-new": Fail},
	flawed.DanglingPermission:       {"cancel-permission": Fail},
	flawed.UnstableVariants:         {"prompt-stream": Fail, "schema": Fail},
	flawed.UnsupportedClientMethods: {"client-requests": Fail},
	flawed.NullResults:              {"set-mode": Fail, "schema": Fail},
	flawed.WrongUnknownCode:         {"unknown-method": Fail},
	flawed.NoParseError:             {"malformed-json": Fail},
	flawed.DiesOnGarbage:            {"malformed-json": Fail},
	flawed.ConcurrentPrompts:        {"concurrent-prompt": Fail},
	flawed.ConcurrentWork:           {"concurrent-prompt": Fail},
	flawed.DropSecondPrompt:         {"concurrent-prompt": Fail},
	flawed.PreemptTurn:              {"concurrent-prompt": Fail},
	flawed.InterleavePrompts:        {"concurrent-prompt": Fail},
	flawed.IdlessErrorAnswers:       {"notification": Fail, "schema": Fail},
	flawed.RelativePaths:            {"client-requests": Fail},
	flawed.ForeignSession:           {"client-requests": Fail},
	flawed.SchemaViolation:          {"prompt-stream": Fail, "schema": Fail},
	flawed.UnknownSessionOK:         {"unknown-session": Fail},
	flawed.LoadWithoutHistory:       {"session-load": Fail},
	flawed.ResumeReplaysHistory:     {"session-resume": Fail},
	flawed.CloseKeepsServing:        {"session-close": Fail},
	flawed.ListOmitsSessions:        {"session-list": Fail},
}

// TestCheck_EachDefectFailsItsScenarios checks every defect of the flawed
// agent alone, and the reference agent with its quirks: each verdict must
// be the table's (no false pass, no false fail), and the table of
// verdicts in docs/checking.md must be what check says.
func TestCheck_EachDefectFailsItsScenarios(t *testing.T) {
	if got, want := slices.Sorted(maps.Keys(defectFails)), slices.Sorted(slices.Values(flawed.All)); !slices.Equal(got, want) {
		t.Fatalf("defect table covers %v, the flawed agent has %v", got, want)
	}
	var mu sync.Mutex
	reports := map[flawed.Defect]*Report{}
	t.Run("defects", func(t *testing.T) {
		for _, d := range flawed.All {
			t.Run(string(d), func(t *testing.T) {
				t.Parallel()
				// On the reference agent that serves the session methods,
				// so that their scenarios run rather than skip.
				rep := runCheck(t, testOptions(flawedDialer(flawed.Set{d: true, flawed.SessionMethods: true})))
				mu.Lock()
				reports[d] = rep
				mu.Unlock()
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
	})
	// Each quirk alone fails nothing either (together they are the
	// reference agent of TestCheck_ConformantAgentPassesAll).
	t.Run("quirks", func(t *testing.T) {
		for _, q := range flawed.Quirks {
			t.Run(string(q), func(t *testing.T) {
				t.Parallel()
				rep := runCheck(t, testOptions(flawedDialer(flawed.Set{q: true, flawed.SessionMethods: true})))
				for _, r := range rep.Results {
					if r.Status != Pass {
						t.Errorf("%s: %s (%s), want PASS", r.ID, r.Status, r.Reason)
					}
				}
			})
		}
	})
	if t.Failed() || len(reports) != len(flawed.All) {
		return
	}
	table := verdictTable(reports)
	page, err := os.ReadFile("../../docs/checking.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok1 := strings.Cut(string(page), tableBegin+"\n")
	inPage, _, ok2 := strings.Cut(rest, tableEnd)
	if !ok1 || !ok2 || inPage != table {
		t.Errorf("docs/checking.md's verdict table (between %s and %s) is not what check says; it should read:\n%s", tableBegin, tableEnd, table)
	}
}

const (
	tableBegin = "<!-- check verdicts: kept by TestCheck_EachDefectFailsItsScenarios -->"
	tableEnd   = "<!-- end of check verdicts -->"
)

// verdictTable renders check's verdict on each defect as a Markdown table.
func verdictTable(reports map[flawed.Defect]*Report) string {
	var b strings.Builder
	b.WriteString("| agent | scenarios not passing (tier) | exit |\n|---|---|---|\n")
	var quirks []string
	for _, q := range flawed.Quirks {
		quirks = append(quirks, "`"+string(q)+"`")
	}
	fmt.Fprintf(&b, "| reference agent (with %s) | none | 0 |\n", strings.Join(quirks, ", "))
	for _, d := range flawed.All {
		rep := reports[d]
		var not []string
		for _, r := range rep.Results {
			if r.Status != Pass {
				not = append(not, fmt.Sprintf("%s %s (%s)", r.ID, r.Status, r.Tier))
			}
		}
		exit := 0
		if rep.Failed() {
			exit = 1
		}
		fmt.Fprintf(&b, "| `%s` | %s | %d |\n", d, strings.Join(not, ", "), exit)
	}
	return b.String()
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

// TestCheck_FailOnAndBaseline: which failures fail a run. A capability
// failure does by default; --fail-on chooses the tiers; a baseline
// excuses the failures it lists and fails the run when one of them passed.
func TestCheck_FailOnAndBaseline(t *testing.T) {
	o := testOptions(flawedDialer(flawed.Set{flawed.RelativePaths: true, flawed.NoReinit: true}))
	o.Only = []string{"client-requests", "reinitialize", "unknown-method"}
	rep := runCheck(t, o)
	if rep.Results[0].Status != Fail || rep.Results[2].Status != Fail {
		t.Fatalf("report:\n%s", dump(rep))
	}
	for _, tc := range []struct {
		failOn   []Tier
		baseline []string
		failed   bool
	}{
		{nil, nil, true}, // capability fails by default
		{[]Tier{Mandatory}, nil, false},
		{[]Tier{Mandatory, Advisory}, []string{"client-requests"}, true},
		{nil, []string{"client-requests"}, false},
		{nil, []string{"client-requests", "unknown-method"}, true}, // stale: unknown-method passes
		{[]Tier{Mandatory}, []string{"unknown-method"}, true},
	} {
		r := *rep
		r.Results = slices.Clone(rep.Results)
		r.FailOn = tc.failOn
		r.ApplyBaseline(tc.baseline)
		if r.Failed() != tc.failed {
			t.Errorf("fail-on %v, baseline %v: Failed() = %v, want %v\n%s", tc.failOn, tc.baseline, r.Failed(), tc.failed, dump(&r))
		}
		if slices.Contains(tc.baseline, "unknown-method") && !strings.Contains(dump(&r), "stale baseline: unknown-method") {
			t.Errorf("the report does not name the stale entry:\n%s", dump(&r))
		}
	}
	if _, err := ParseBaseline(strings.NewReader("cancel # flaky\n\nno-such\n")); err == nil || !strings.Contains(err.Error(), `line 3: unknown scenario "no-such"`) {
		t.Errorf("ParseBaseline of an unknown id: %v", err)
	}
	if ids, err := ParseBaseline(strings.NewReader("# comment\ncancel  schema # both\n")); err != nil || !slices.Equal(ids, []string{"cancel", "schema"}) {
		t.Errorf("ParseBaseline = %q, %v", ids, err)
	}
	if _, err := ParseTiers("mandatory,optional"); err == nil {
		t.Error("ParseTiers accepted an unknown tier")
	}
}

// FuzzParseBaseline: any baseline file either parses into known scenario
// ids, each from a line's words outside its comment, or is refused naming
// the line; so is any --fail-on list.
func FuzzParseBaseline(f *testing.F) {
	f.Add("cancel # flaky on CI\n\nschema\n", "mandatory,capability")
	f.Add("no-such\n", "advisory, informational")
	f.Add("# only a comment", ",")
	f.Fuzz(func(t *testing.T, file, tiers string) {
		ids, err := ParseBaseline(strings.NewReader(file))
		if err != nil {
			if !strings.Contains(err.Error(), "line ") && !strings.Contains(err.Error(), "reading the baseline") {
				t.Fatalf("error without its line: %v", err)
			}
		}
		for _, id := range ids {
			if !slices.ContainsFunc(scenarios, func(s Scenario) bool { return s.ID == id }) {
				t.Fatalf("unknown id %q accepted", id)
			}
		}
		ts, err := ParseTiers(tiers)
		if err == nil && len(ts) == 0 {
			t.Fatal("no tier and no error")
		}
		for _, tr := range ts {
			if !slices.Contains(allTiers, tr) {
				t.Fatalf("unknown tier %q accepted", tr)
			}
		}
	})
}

// TestCheck_ScenarioWorkingDirectories: when check makes the working
// directory, each scenario's session gets a subdirectory of its own,
// holding hello.txt; a directory the user gave is every scenario's, as
// given, and check adds nothing to it.
func TestCheck_ScenarioWorkingDirectories(t *testing.T) {
	o := testOptions(flawedDialer(flawed.Set{flawed.SessionMethods: true}))
	o.Only = []string{"session-list", "client-requests"}
	o.Transcripts = true
	rep := runCheck(t, o)
	cwds := map[string]string{}
	for _, r := range rep.Results {
		if r.Status != Pass {
			t.Fatalf("%s: %s %s", r.ID, r.Status, r.Reason)
		}
		for _, l := range r.Transcript {
			if _, raw, ok := strings.Cut(l, `"method":"session/new","params":{"cwd":"`); ok {
				cwds[r.ID], _, _ = strings.Cut(raw, `"`)
			}
		}
	}
	if len(cwds) != 2 || cwds["session-list"] == cwds["client-requests"] ||
		filepath.Base(cwds["session-list"]) != "session-list" || filepath.Dir(cwds["session-list"]) != filepath.Dir(cwds["client-requests"]) {
		t.Errorf("the scenarios' working directories are %q, want one subdirectory each", cwds)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.Cwd = dir
	rep = runCheck(t, o)
	for _, r := range rep.Results {
		if r.Status != Pass {
			t.Errorf("%s in the user's directory: %s %s", r.ID, r.Status, r.Reason)
		}
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 1 {
		t.Errorf("the user's directory holds %v (%v), want hello.txt alone", entries, err)
	}
}

// TestCheck_ConcurrentPromptEvidence: a second prompt that runs after a
// first turn which ended on its own is queued only when its work shows it
// began after that turn's answer; work that names nothing leaves the
// verdict inconclusive.
func TestCheck_ConcurrentPromptEvidence(t *testing.T) {
	for _, tc := range []struct {
		filePrompt string
		status     Status
		reason     string
	}{
		{DefaultFilePrompt, Pass, "its work began after the first turn ended"},
		{"hello", Skip, "inconclusive: "},
	} {
		o := testOptions(flawedDialer(flawed.Set{flawed.QueuePrompts: true}))
		o.Only = []string{"concurrent-prompt"}
		o.LongPrompt = "hello" // a turn that ends on its own
		o.FilePrompt = tc.filePrompt
		r := runCheck(t, o).Results[0]
		if r.Status != tc.status || !strings.Contains(r.Reason, tc.reason) {
			t.Errorf("second prompt %q: %s %q, want %s %q", tc.filePrompt, r.Status, r.Reason, tc.status, tc.reason)
		}
	}
}
