package config

import (
	"strings"
	"testing"
	"time"
)

func TestParse_Shim(t *testing.T) {
	src := `
shim {
  notification-responses = false
  one-turn               = true
  late_quiet             = "80ms"
  late_updates           = "forward"
  one_turn               = "queue"
  schema_invalid         = "drop"
  stdout_noise_limit     = 50
  mode                   = "report"
}
`
	cfg, diags := Parse([]byte(src), "s.hcl")
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	s := cfg.Shim
	if s == nil || s.Rules["notification-responses"] || !s.Rules["one-turn"] || len(s.Rules) != 2 ||
		s.LateQuiet != 80*time.Millisecond || s.LateUpdates != "forward" || s.OneTurn != "queue" ||
		s.SchemaInvalid != "drop" || s.NoiseLimit != 50 || s.Mode != "report" {
		t.Errorf("shim = %+v", s)
	}
	if cfg, _ := Parse([]byte("log_level = \"info\"\n"), "s.hcl"); cfg.Shim != nil {
		t.Errorf("no shim block, but Shim = %+v", cfg.Shim)
	}
	if cfg, diags := Parse([]byte("shim {\n  late_quiet = \"off\"\n}\n"), "s.hcl"); diags.HasErrors() || cfg.Shim.LateQuiet >= 0 {
		t.Errorf("late_quiet off = %v, %v", cfg.Shim.LateQuiet, diags)
	}
}

func TestParse_ShimBad(t *testing.T) {
	for src, want := range map[string]string{
		"shim {\n  late-update = false\n}\n":          "neither a rule",
		"shim {\n  one_turn = \"maybe\"\n}\n":         "one_turn must be one of reject, queue",
		"shim {\n  stdout_noise_limit = 0\n}\n":       "at least 1",
		"shim {\n  envelope = \"yes please\"\n}\n":    "bool",
		"shim {\n  schema_invalid = \"explode\"\n}\n": "log, drop",
	} {
		_, diags := Parse([]byte(src), "s.hcl")
		if !diags.HasErrors() || !strings.Contains(diags.Error(), want) || diags[0].Subject == nil {
			t.Errorf("%q: diags %v, want an error with %q and a range", src, diags, want)
		}
	}
}

// The annotated example documents the shim block with its defaults.
func TestLoad_exampleShim(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "k")
	t.Setenv("AGENT_TOKEN", "t")
	cfg, diags := Load("../../config.example.hcl")
	if diags.HasErrors() || cfg.Shim == nil || !cfg.Shim.Rules["notification-responses"] ||
		cfg.Shim.LateQuiet != 0 || cfg.Shim.NoiseLimit != 1000 || cfg.Shim.OneTurn != "reject" {
		t.Errorf("shim = %+v, %v", cfg.Shim, diags)
	}
}
