// Package check drives an ACP agent the way an editor does and reports how
// far it is from ACP v1: `acp-bridge check` and `acp-bridge compare`.
//
// Each scenario runs on a fresh connection (a new agent process, or a new
// WebSocket connection), records the wire transcript, and ends in one of
// four statuses: PASS, FAIL, SKIP (the agent did not advertise or exercise
// what the scenario needs) or NOT RUN (a step before the one under test
// failed). Scenarios come in the tiers of the official acp-tck: mandatory
// (a FAIL, or a NOT RUN, fails the run), capability (checked when the agent
// has the capability) and advisory (SHOULDs). Every verdict has a reason,
// and a failure carries the offending lines of the transcript.
//
// check talks raw lines rather than through an ACP library because several
// scenarios must send bytes no library would (malformed JSON, an invalid
// request) and must see every byte the agent writes.
package check

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Tier is a scenario's weight, as in the official acp-tck.
type Tier string

const (
	Mandatory  Tier = "mandatory"
	Capability Tier = "capability"
	Advisory   Tier = "advisory"
	// Informational scenarios report what the agent offers; they never
	// fail (unless --fail-on names them).
	Informational Tier = "informational"
)

// Status is a scenario's verdict.
type Status string

const (
	Pass   Status = "PASS"
	Fail   Status = "FAIL"
	Skip   Status = "SKIP"
	NotRun Status = "NOT RUN"
)

// Options configure a run.
type Options struct {
	// Dialer reaches the agent; required.
	Dialer Dialer
	// Only restricts the run to these scenario ids (all when empty).
	Only []string
	// Timeout bounds every wait for an answer (30s when zero). Real agents
	// may take seconds to answer a prompt.
	Timeout time.Duration
	// Quiet is how long silence is taken to mean nothing more is coming
	// (300ms when zero).
	Quiet time.Duration
	// CancelAfter is how long the cancel scenarios wait for the long
	// prompt's first update before cancelling anyway (1s when zero).
	CancelAfter time.Duration
	// Prompt is a prompt the agent answers with a short streamed reply.
	Prompt string
	// LongPrompt keeps the agent busy long enough to be cancelled.
	LongPrompt string
	// FilePrompt makes the agent read hello.txt in the session's cwd
	// (client-requests; concurrent-prompt's second prompt, whose work
	// names hello.txt).
	FilePrompt string
	// PermissionPrompt makes the agent ask for permission.
	PermissionPrompt string
	// Cwd is the sessions' working directory, shared by every scenario.
	// When empty, check makes a temporary directory and gives each
	// scenario a subdirectory of its own holding hello.txt, so that what
	// an agent remembers per directory (an "always allow" permission
	// choice) cannot carry over from one scenario into the next.
	Cwd string
	// TraceDir, when set, keeps every scenario's whole wire transcript as a
	// trace file, DIR/SCENARIO.ndjson, and has an acp-bridge under test
	// write its own trace beside it (DIR/SCENARIO.bridge-PID.ndjson).
	TraceDir string
	// Transcripts puts every scenario's whole transcript in the report,
	// passing ones too; by default only a failure's offending lines are.
	Transcripts bool
	// Protocol is the ACP version the scenarios speak: 1 (when zero) or 2
	// (V2Scenarios).
	Protocol int

	// ownCwd is set when check made Cwd: each scenario then runs in a
	// subdirectory of it.
	ownCwd bool
}

// Default prompts: plain requests a real agent handles, worded so that the
// flawed test agent (tests/fakeagent/flawed) picks the matching script.
const (
	DefaultPrompt           = "hello"
	DefaultLongPrompt       = "Write a long story, at least two thousand words, one paragraph at a time."
	DefaultFilePrompt       = "Read the file hello.txt in the current directory and tell me what it says."
	DefaultPermissionPrompt = "Ask for my permission, then create the file acp-check.txt containing ok."
)

func (o *Options) defaults() (cleanup func(), err error) {
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Quiet <= 0 {
		o.Quiet = 300 * time.Millisecond
	}
	if o.CancelAfter <= 0 {
		o.CancelAfter = time.Second
	}
	if o.Prompt == "" {
		o.Prompt = DefaultPrompt
	}
	if o.LongPrompt == "" {
		o.LongPrompt = DefaultLongPrompt
	}
	if o.FilePrompt == "" {
		o.FilePrompt = DefaultFilePrompt
	}
	if o.PermissionPrompt == "" {
		o.PermissionPrompt = DefaultPermissionPrompt
	}
	cleanup = func() {}
	if o.Cwd == "" {
		dir, err := os.MkdirTemp("", "acp-check-")
		if err != nil {
			return nil, err
		}
		if err := seedCwd(dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		o.Cwd, o.ownCwd = dir, true
		cleanup = func() { os.RemoveAll(dir) }
	}
	if abs, err := filepath.Abs(o.Cwd); err == nil {
		o.Cwd = abs
	}
	return cleanup, nil
}

// seedCwd writes the files the prompts refer to into dir.
func seedCwd(dir string) error {
	return os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("Hello from acp-bridge check.\n"), 0o644)
}

// scenarioCwd returns the options of scenario id: o itself when the user
// gave the working directory, else o with a working directory of the
// scenario's own, made and seeded under the one check made.
func scenarioCwd(o *Options, id string) (*Options, error) {
	if !o.ownCwd {
		return o, nil
	}
	dir := filepath.Join(o.Cwd, id)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	if err := seedCwd(dir); err != nil {
		return nil, err
	}
	so := *o
	so.Cwd = dir
	return &so, nil
}

// Result is one scenario's verdict.
type Result struct {
	ID       string        `json:"id"`
	Tier     Tier          `json:"tier"`
	Title    string        `json:"title"`
	Status   Status        `json:"status"`
	Reason   string        `json:"reason"`
	Duration time.Duration `json:"duration_ns"`
	// Transcript holds the offending lines (FAIL, NOT RUN), formatted.
	Transcript []string `json:"transcript,omitempty"`
	// Diagnostics is what the agent said on the side (stderr, exit).
	Diagnostics string `json:"diagnostics,omitempty"`
	// Expected is set when a baseline lists the scenario as failing.
	Expected bool `json:"expected_failure,omitempty"`
}

// DefaultFailOn are the tiers whose failures fail a run unless told
// otherwise: a capability the agent advertises and gets wrong breaks
// editors as surely as a mandatory rule.
var DefaultFailOn = []Tier{Mandatory, Capability}

// Failed reports whether the result fails a run with the default tiers.
func (r Result) Failed() bool { return r.FailsOn(DefaultFailOn) }

// FailsOn reports whether the result fails a run that fails on tiers: a
// scenario of one of them that failed or could not run.
func (r Result) FailsOn(tiers []Tier) bool {
	return !r.Expected && slices.Contains(tiers, r.Tier) && (r.Status == Fail || r.Status == NotRun)
}

// Report is a whole run.
type Report struct {
	Agent   string   `json:"agent"`
	Results []Result `json:"results"`
	// Interrupted says why the run stopped early (a signal), when it did.
	Interrupted string `json:"interrupted,omitempty"`
	// FailOn are the tiers whose failures fail the run; DefaultFailOn
	// when empty.
	FailOn []Tier `json:"fail_on,omitempty"`
	// Stale lists the baseline's expected failures that passed.
	Stale []string `json:"stale_baseline,omitempty"`
}

// failOn returns the tiers that fail the run.
func (r *Report) failOn() []Tier {
	if len(r.FailOn) == 0 {
		return DefaultFailOn
	}
	return r.FailOn
}

// Failed reports whether a scenario of a failing tier failed or could not
// run.
func (r *Report) Failed() bool {
	if len(r.Stale) > 0 {
		return true
	}
	for _, x := range r.Results {
		if x.FailsOn(r.failOn()) {
			return true
		}
	}
	return false
}

// Scenario is one check.
type Scenario struct {
	ID    string
	Tier  Tier
	Title string
	run   func(*run) verdict
}

// Scenarios lists every scenario, in the order they run.
func Scenarios() []Scenario { return slices.Clone(scenarios) }

// verdict is what a scenario returns; lines are transcript indexes to show.
type verdict struct {
	status Status
	reason string
	lines  []int
	// extra are offending lines from other scenarios' transcripts,
	// already formatted.
	extra []string
}

func pass(format string, args ...any) verdict {
	return verdict{status: Pass, reason: fmt.Sprintf(format, args...)}
}

func skip(format string, args ...any) verdict {
	return verdict{status: Skip, reason: fmt.Sprintf(format, args...)}
}

func notRun(format string, args ...any) verdict {
	return verdict{status: NotRun, reason: fmt.Sprintf(format, args...)}
}

func fail(lines []int, format string, args ...any) verdict {
	return verdict{status: Fail, reason: fmt.Sprintf(format, args...), lines: lines}
}

// A protocol is what a run depends on in the ACP version its scenarios
// speak: the scenarios, the schema, and the steps that version changed.
// v1 and v2 runs share everything else.
type protocol struct {
	name      string // "v1", "v2"
	scenarios []Scenario
	// unknown names a scenario id in errors: "scenario".
	unknown string
	// notApplicable are the scenarios reported SKIP without dialling the
	// agent, with why.
	notApplicable map[string]string
	// initParams are the params of initialize, which asks for version;
	// capabilities is the member of its result the agent's capabilities
	// are in, versionRule what the spec says of the answer's version.
	version      int
	initParams   map[string]any
	capabilities string
	versionRule  string
	loadSchema   func() (*Schema, error)
	// validate checks one message the agent wrote against the schema.
	validate func(r *run, s *Schema, m Msg) []string
	// turnEnded reports whether m ends the turn of the prompt promptID:
	// in v1 the prompt's answer, in v2 an idle state_update (or an error
	// answer). turnEnd names that message, stopReason the gjson path of
	// the stop reason in it.
	turnEnded  func(r *run, m Msg, promptID string) bool
	turnEnd    string
	stopReason string
}

// protocolOf returns the protocol of ACP version v: 1 (or 0) or 2.
func protocolOf(v int) *protocol {
	if v == 2 {
		return protocolV2
	}
	return protocolV1
}

// Run runs the scenarios o selects, each on a fresh connection, and
// returns the report. An unknown id in o.Only is an error.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Dialer == nil {
		return nil, fmt.Errorf("check: no agent to check")
	}
	if o.Protocol < 0 || o.Protocol > 2 {
		return nil, fmt.Errorf("check: protocol version %d: check speaks ACP 1 and 2", o.Protocol)
	}
	proto := protocolOf(o.Protocol)
	for _, id := range o.Only {
		if !slices.ContainsFunc(proto.scenarios, func(s Scenario) bool { return s.ID == id }) {
			return nil, fmt.Errorf("check: unknown %s %q (known: %s)", proto.unknown, id, strings.Join(ids(proto.scenarios), ", "))
		}
	}
	cleanup, err := o.defaults()
	if err != nil {
		return nil, err
	}
	defer cleanup()
	rep := &Report{Agent: o.Dialer.String()}
	// Every message of every scenario is validated against the schema;
	// the schema scenario, which runs last, reports what the others saw.
	var seen []finding
	for _, s := range proto.scenarios {
		if len(o.Only) > 0 && !slices.Contains(o.Only, s.ID) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		if why, ok := proto.notApplicable[s.ID]; ok {
			rep.Results = append(rep.Results, Result{ID: s.ID, Tier: s.Tier, Title: s.Title, Status: Skip,
				Reason: "not applicable to ACP " + proto.name + ": " + why})
			continue
		}
		res, found := runOne(ctx, &o, proto, s, seen)
		rep.Results = append(rep.Results, res)
		seen = append(seen, found...)
	}
	if err := ctx.Err(); err != nil {
		rep.Interrupted = context.Cause(ctx).Error()
		return rep, fmt.Errorf("check interrupted (%w): the report covers the scenarios run so far", err)
	}
	return rep, nil
}

func ids(list []Scenario) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.ID)
	}
	return out
}

func runOne(ctx context.Context, o *Options, proto *protocol, s Scenario, prior []finding) (res Result, found []finding) {
	res = Result{ID: s.ID, Tier: s.Tier, Title: s.Title}
	start := time.Now()
	defer func() { res.Duration = time.Since(start) }()
	ctx = withScenario(ctx, s.ID)
	o, err := scenarioCwd(o, s.ID)
	if err != nil {
		res.Status, res.Reason = NotRun, "cannot make the scenario's working directory: "+err.Error()
		return res, nil
	}
	p, err := dialPeer(ctx, o)
	if err != nil {
		res.Status, res.Reason = NotRun, "cannot reach the agent: "+err.Error()
		return res, nil
	}
	r := &run{peer: p, proto: proto, prior: prior}
	v := s.run(r)
	p = r.peer                   // a scenario may move to a second connection
	diag := p.conn.Diagnostics() // before close: how the agent ended on its own
	p.close()
	if s.ID != "schema" {
		found = r.findings(s.ID)
	}
	res.Status, res.Reason = v.status, v.reason
	if err := ctx.Err(); err != nil {
		// The connection was closed under the scenario: its verdict
		// says nothing about the agent.
		res.Status, res.Reason = NotRun, "interrupted ("+context.Cause(ctx).Error()+") before the scenario ended"
	}
	if res.Status == Fail || res.Status == NotRun {
		if len(v.lines) > 0 || len(v.extra) == 0 {
			res.Transcript = excerpt(p.messages(), v.lines)
		}
		res.Transcript = append(res.Transcript, v.extra...)
		res.Diagnostics = diag
	}
	if o.Transcripts {
		res.Transcript = nil
		for _, m := range p.messages() {
			res.Transcript = append(res.Transcript, FormatLine(m))
		}
		res.Transcript = append(res.Transcript, v.extra...)
		res.Diagnostics = diag
	}
	if o.TraceDir != "" {
		if err := writeTranscript(o.TraceDir, s.ID, p.start, p.messages()); err != nil {
			res.Diagnostics += err.Error() + "\n"
		}
	}
	return res, found
}

// excerpt formats the offending lines, or the transcript's tail when the
// scenario named none.
func excerpt(all []Msg, lines []int) []string {
	var pick []Msg
	if len(lines) == 0 {
		pick = all[max(0, len(all)-8):]
	} else {
		for _, n := range lines {
			if n >= 0 && n < len(all) {
				pick = append(pick, all[n])
			}
		}
	}
	var out []string
	for _, m := range pick {
		out = append(out, FormatLine(m))
	}
	return out
}

// FormatLine renders one transcript line: index, time, direction, bytes
// (shortened past 400 bytes).
func FormatLine(m Msg) string {
	dir := "agent → "
	if m.Out {
		dir = "→ agent"
	}
	raw := string(m.Raw)
	if len(raw) > 400 {
		raw = raw[:400] + fmt.Sprintf("… (%d bytes)", len(m.Raw))
	}
	return fmt.Sprintf("#%-3d %8.3fs %s %s", m.N, m.At.Seconds(), dir, raw)
}

// ParseTiers reads a comma-separated list of tier names (--fail-on).
func ParseTiers(list string) ([]Tier, error) {
	var out []Tier
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		t := Tier(f)
		if !slices.Contains(allTiers, t) {
			return nil, fmt.Errorf("unknown tier %q (tiers: mandatory, capability, advisory, informational)", f)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no tier given (tiers: mandatory, capability, advisory, informational)")
	}
	return out, nil
}

var allTiers = []Tier{Mandatory, Capability, Advisory, Informational}

// ParseBaseline reads an expected-failures file: one scenario id per line,
// "#" starting a comment. An unknown id is an error, so that a typo
// cannot hide a failure.
func ParseBaseline(r io.Reader) ([]string, error) {
	var expected []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		for _, id := range strings.Fields(line) {
			if !slices.ContainsFunc(scenarios, func(s Scenario) bool { return s.ID == id }) {
				return nil, fmt.Errorf("line %d: unknown scenario %q (known: %s)", n, id, strings.Join(ids(scenarios), ", "))
			}
			expected = append(expected, id)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading the baseline (one scenario id per line): %w", err)
	}
	return expected, nil
}

// ApplyBaseline marks the results of the scenarios in expected as
// expected failures: a FAIL or NOT RUN there no longer fails the run. A
// scenario in expected that ran and passed makes the baseline stale,
// which fails the run until the entry is removed: a fixed defect must not
// stay silently excused.
func (r *Report) ApplyBaseline(expected []string) {
	for i, x := range r.Results {
		if !slices.Contains(expected, x.ID) {
			continue
		}
		switch x.Status {
		case Fail, NotRun:
			r.Results[i].Expected = true
		case Pass:
			r.Stale = append(r.Stale, x.ID)
		}
	}
}
