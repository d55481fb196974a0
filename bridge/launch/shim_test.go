package launch

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/config"
	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/acpv0"
)

func TestResolveShim(t *testing.T) {
	cfg, diags := config.Parse([]byte("shim {\n  envelope = false\n  one_turn = \"queue\"\n  late_quiet = \"off\"\n  stdout_noise_limit = 7\n}\n"), "s.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s, err := ResolveShim(cfg, Flags{})
	if err != nil || s.Off || s.Report || s.Options.On(acp.RuleEnvelope) || !s.Options.On(acp.RuleSchema) ||
		s.OneTurn != bridge.OneTurnQueue || s.Options.Quiet >= 0 || s.NoiseLimit != 7 {
		t.Errorf("from the file: %+v, %v", s, err)
	}
	// Flags over the file: --shim-disable adds, --shim off switches all.
	s, err = ResolveShim(cfg, Flags{ShimDisable: []string{"schema,one-turn", "field-names"}, Shim: "report=/tmp/r.json", Set: map[string]bool{FlagShim: true}})
	if err != nil || !s.Report || s.ReportFile != "/tmp/r.json" || s.Options.On(acp.RuleSchema) ||
		s.Options.On(acp.RuleFieldNames) || s.OneTurn != bridge.OneTurnOff || !s.Options.On(acp.RuleLateUpdates) {
		t.Errorf("with flags: %+v, %v", s, err)
	}
	s, err = ResolveShim(&config.Config{}, Flags{Shim: "off", Set: map[string]bool{FlagShim: true}})
	if err != nil || !s.Off || s.OneTurn != bridge.OneTurnOff {
		t.Errorf("--shim off: %+v, %v", s, err)
	}
	for _, r := range acp.Rules {
		if s.Options.On(r) {
			t.Errorf("--shim off left %s on", r)
		}
	}
	if s, _ := ResolveShim(&config.Config{}, Flags{}); s.Off || s.OneTurn != bridge.OneTurnReject || s.NoiseLimit != DefaultNoiseLimit {
		t.Errorf("defaults: %+v", s)
	}
	for _, f := range []Flags{
		{Shim: "sometimes", Set: map[string]bool{FlagShim: true}},
		{Shim: "report=", Set: map[string]bool{FlagShim: true}},
		{ShimDisable: []string{"envelop"}},
	} {
		if _, err := ResolveShim(&config.Config{}, f); err == nil {
			t.Errorf("%+v accepted", f)
		}
	}
}

// The shim goes in front of acp agents only; one-turn and the report apply
// to every dialect.
func TestApplyShim(t *testing.T) {
	s, _ := ResolveShim(&config.Config{}, Flags{})
	spec := Agent{Name: "a", Command: &legacy.Command{Path: "/bin/true"}}
	newTr, rep := s.ApplyShim(&spec, acp.Dialect, func() translate.Translator { return acp.New() })
	if _, ok := newTr().(*acp.Shim); !ok || spec.Command.NoiseLimit != DefaultNoiseLimit || spec.Command.OnNoise == nil {
		t.Errorf("acp: translator %T, command %+v", newTr(), spec.Command)
	}
	spec = Agent{Name: "v0", Command: &legacy.Command{Path: "/bin/true"}}
	v0 := func() translate.Translator { return acp.New() }
	if newTr, _ := s.ApplyShim(&spec, acpv0.Dialect, v0); newTr().(*acp.Relay) == nil || spec.Command.NoiseLimit != 0 {
		t.Errorf("acp-v0 got the shim: command %+v", spec.Command)
	}
	b := &bridge.Bridge{Dialect: acp.Dialect}
	s.Hook(b, rep)
	b.OnNote(bridge.TapEvent{Hop: bridge.BridgeHop, Note: "one-turn", Detail: "first"})
	b.OnNote(bridge.TapEvent{Hop: bridge.BridgeHop, Note: "one-turn", Detail: "second"})
	b.OnNote(bridge.TapEvent{Hop: bridge.BridgeHop, Note: "cancel-grace", Detail: "grace"})
	spec.Command.OnNoise = nil
	rep.hit("stdout-noise", "non-JSON line on stdout: hello")

	dir := t.TempDir()
	s.Report, s.ReportFile = true, filepath.Join(dir, "r.json")
	rep.shim = s
	if err := rep.Finish(nil); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(s.ReportFile)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Agent string
		Rules []RuleReport
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]RuleReport{
		"one-turn":              {Rule: "one-turn", Enabled: true, Hits: 2, First: "first"},
		"cancelled-stop-reason": {Rule: "cancelled-stop-reason", Enabled: true, Hits: 1, First: "grace"},
		"stdout-noise":          {Rule: "stdout-noise", Enabled: true, Hits: 1, First: "non-JSON line on stdout: hello"},
	}
	if got.Agent != "a" || len(got.Rules) != len(acp.Rules) {
		t.Fatalf("report %s", raw)
	}
	for _, r := range got.Rules {
		if w, ok := want[r.Rule]; ok && r != w || !ok && (r.Hits != 0 || !r.Enabled) {
			t.Errorf("rule %+v", r)
		}
	}
	var buf bytes.Buffer
	s.ReportFile = ""
	rep.shim = s
	rep.Finish(&buf)
	if !strings.Contains(buf.String(), "one-turn") || !strings.Contains(buf.String(), "FIRST EXAMPLE") {
		t.Errorf("table:\n%s", buf.String())
	}
}
