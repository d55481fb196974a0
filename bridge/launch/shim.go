package launch

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// The compliance shim's flags.
const (
	FlagShim        = "shim"
	FlagShimDisable = "shim-disable"
)

// DefaultNoiseLimit is how many non-JSON stdout lines in a row an acp agent
// may write before the stdout-noise rule reports it broken.
const DefaultNoiseLimit = 1000

// Shim is the compliance shim's configuration after precedence: the
// shim { … } block, then --shim and --shim-disable.
type Shim struct {
	// Off switches every rule off: the plain relay.
	Off bool
	// Report asks for the per-rule report at exit: on stderr, or as JSON
	// in ReportFile when set.
	Report     bool
	ReportFile string
	Options    acp.ShimOptions
	OneTurn    bridge.OneTurnMode
	NoiseLimit int
}

// ResolveShim applies --shim and --shim-disable over the config's shim
// block. --shim takes on, off, report or report=FILE.
func ResolveShim(cfg *config.Config, f Flags) (Shim, error) {
	s := Shim{Options: acp.ShimOptions{Off: map[acp.Rule]bool{}}, NoiseLimit: DefaultNoiseLimit}
	mode := ""
	if b := cfg.Shim; b != nil {
		for name, on := range b.Rules {
			s.Options.Off[acp.Rule(name)] = !on
		}
		mode = b.Mode
		s.Options.Quiet = b.LateQuiet
		s.Options.ForwardLate = b.LateUpdates == "forward"
		s.Options.DropInvalid = b.SchemaInvalid == "drop"
		if b.OneTurn == "queue" {
			s.OneTurn = bridge.OneTurnQueue
		}
		if b.NoiseLimit > 0 {
			s.NoiseLimit = b.NoiseLimit
		}
	}
	if f.Set[FlagShim] {
		mode = f.Shim
	}
	switch {
	case mode == "" || mode == "on":
	case mode == "off":
		s.Off = true
	case mode == "report":
		s.Report = true
	case strings.HasPrefix(mode, "report="):
		s.Report, s.ReportFile = true, strings.TrimPrefix(mode, "report=")
		if s.ReportFile == "" {
			return s, Usagef("--%s report=FILE needs a file name", FlagShim)
		}
	default:
		return s, Usagef("--%s takes on, off, report or report=FILE; got %q", FlagShim, mode)
	}
	for _, list := range f.ShimDisable {
		for _, name := range strings.Split(list, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			if !acp.IsRule(name) {
				return s, Usagef("--%s: %q is not a rule of the compliance shim (see docs/shim.md)", FlagShimDisable, name)
			}
			s.Options.Off[acp.Rule(name)] = true
		}
	}
	if s.Off {
		for _, r := range acp.Rules {
			s.Options.Off[r] = true
		}
	}
	if !s.Options.On(acp.RuleOneTurn) {
		s.OneTurn = bridge.OneTurnOff
	}
	return s, nil
}

// ApplyShim puts the shim's rules into the engine b will be built from:
// the acp dialect gets the shim's translator, its child the stdout-noise
// limit, and every dialect the one-turn rule. It returns the report that
// counts the repairs (its Tap goes into the Bridge with Hook).
func (s Shim) ApplyShim(spec *Agent, dialect translate.Dialect, newTranslator func() translate.Translator) (func() translate.Translator, *Report) {
	rep := newReport(spec.Name, s)
	rep.scrub = NewScrubber(spec.Secrets()...)
	if dialect.Name != acp.Dialect.Name {
		return newTranslator, rep
	}
	if !s.Off {
		opt := s.Options
		newTranslator = func() translate.Translator { return acp.NewShim(opt) }
	}
	if spec.Command != nil && s.Options.On(acp.RuleStdoutNoise) {
		cmd := *spec.Command
		cmd.NoiseLimit = s.NoiseLimit
		cmd.OnNoise = func(line []byte) {
			detail := "non-JSON line on stdout: " + string(line)
			rep.hit(string(acp.RuleStdoutNoise), detail)
			if b := rep.bridge.Load(); b != nil {
				b.Note(bridge.Repair(acp.RuleStdoutNoise), detail) // for the log and the trace
			}
		}
		spec.Command = &cmd
	}
	return newTranslator, rep
}

// Hook sets b's one-turn mode and counts its repairs into r; an existing
// Tap keeps receiving every event.
func (s Shim) Hook(b *bridge.Bridge, r *Report) {
	b.OneTurn = s.OneTurn
	if b.Dialect.Name == acp.Dialect.Name && !s.Options.On(acp.RuleObjectResults) {
		b.DisabledRepairs = map[bridge.Repair]bool{bridge.RepairObjectResults: true}
	}
	r.bridge.Store(b)
	// OnNote, not Tap: the report counts the engine's repairs, and a Tap
	// would cost every message a call and every relayed answer a copy.
	b.AddOnNote(func(ev bridge.TapEvent) {
		// stdout-noise is counted where it is seen, off the loop.
		if ev.Note != "" && ev.Note != string(acp.RuleStdoutNoise) {
			name := ev.Note
			if name == "cancel-grace" {
				// The engine answered a cancelled turn the agent never
				// ended: the second half of cancelled-stop-reason.
				name = string(acp.RuleCancelledStopReason)
			}
			r.hit(name, ev.Detail)
		}
	})
}

// Report counts the shim's repairs by rule, with the first example of each.
// It is safe for concurrent use (stdout-noise is counted off the loop).
type Report struct {
	agent  string
	shim   Shim
	bridge atomic.Pointer[bridge.Bridge] // set by Hook, for stdout-noise notes
	mu     sync.Mutex
	hits   map[string]*RuleReport
	scrub  *Scrubber // the agent's secrets, out of every example
}

// RuleReport is one line of the report.
type RuleReport struct {
	Rule    string `json:"rule"`
	Enabled bool   `json:"enabled"`
	Hits    int    `json:"hits"`
	First   string `json:"first,omitempty"`
}

func newReport(agent string, s Shim) *Report {
	return &Report{agent: agent, shim: s, hits: map[string]*RuleReport{}}
}

func (r *Report) hit(name, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.hits[name]
	if h == nil {
		h = &RuleReport{Rule: name}
		r.hits[name] = h
	}
	if h.Hits == 0 {
		// Scrubbed before it is cut short, which could leave a secret's
		// start that no longer matches it.
		detail = r.scrub.Scrub(detail)
		if len(detail) > 300 {
			detail = detail[:300] + "…"
		}
		h.First = detail
	}
	h.Hits++
}

// Rules returns the report's lines: every shim rule in order, then the
// engine's other repairs that happened.
func (r *Report) Rules() []RuleReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []RuleReport
	seen := map[string]bool{}
	for _, rule := range acp.Rules {
		line := RuleReport{Rule: string(rule), Enabled: r.shim.Options.On(rule)}
		if h := r.hits[string(rule)]; h != nil {
			line.Hits, line.First = h.Hits, h.First
		}
		out = append(out, line)
		seen[string(rule)] = true
	}
	var other []string
	for name := range r.hits {
		if !seen[name] {
			other = append(other, name)
		}
	}
	sort.Strings(other)
	for _, name := range other {
		h := r.hits[name]
		out = append(out, RuleReport{Rule: name, Enabled: true, Hits: h.Hits, First: h.First})
	}
	return out
}

// Finish writes the report if one was asked for: a table on w, or JSON in
// the report file.
func (r *Report) Finish(w io.Writer) error {
	if r == nil || !r.shim.Report {
		return nil
	}
	rules := r.Rules()
	if r.shim.ReportFile != "" {
		b, err := json.MarshalIndent(struct {
			Agent    string       `json:"agent"`
			Shim     string       `json:"shim"`
			Finished time.Time    `json:"finished"`
			Rules    []RuleReport `json:"rules"`
		}{r.agent, r.mode(), time.Now().UTC(), rules}, "", "  ")
		if err != nil {
			return err
		}
		// "%p" is the process id: one report per bridge when a harness
		// starts many with the same flags.
		return os.WriteFile(expandPID(r.shim.ReportFile), append(b, '\n'), 0o600)
	}
	fmt.Fprintf(w, "acp-bridge compliance shim report for agent %s (shim %s):\n", r.agent, r.mode())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tHITS\tFIRST EXAMPLE")
	for _, l := range rules {
		hits := fmt.Sprint(l.Hits)
		if !l.Enabled {
			hits = "off"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", l.Rule, hits, oneLine(l.First))
	}
	return tw.Flush()
}

func (r *Report) mode() string {
	if r.shim.Off {
		return "off"
	}
	return "on"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
