package config

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Shim is the shim { … } block: the compliance shim's switches (docs/shim.md). Rule arguments are the rules' names (one-turn = false);
// the settings are snake_case like the rest of the file.
type Shim struct {
	// Rules holds the rules the block switches, by name.
	Rules map[string]bool
	// Mode is "on", "off" or "report" ("" = not set).
	Mode string
	// LateQuiet is the late-updates quiet period; 0 = not set, negative =
	// no hold ("0s" or "off").
	LateQuiet time.Duration
	// LateUpdates is "drop" or "forward" ("" = not set).
	LateUpdates string
	// OneTurn is "reject" or "queue" ("" = not set).
	OneTurn string
	// SchemaInvalid is "log" or "drop" ("" = not set).
	SchemaInvalid string
	// NoiseLimit is stdout_noise_limit; 0 = not set.
	NoiseLimit int
}

type rawShim struct {
	Body hcl.Body `hcl:",remain"`
}

// shimSettings are the block's arguments other than rule switches, with the
// values each accepts (nil: a duration or a number).
var shimSettings = map[string][]string{
	"mode":               {"on", "off", "report"},
	"late_quiet":         nil,
	"late_updates":       {"drop", "forward"},
	"one_turn":           {"reject", "queue"},
	"schema_invalid":     {"log", "drop"},
	"stdout_noise_limit": nil,
}

func (e *evaluator) shim(raw *rawShim) *Shim {
	if raw == nil {
		return nil
	}
	attrs, diags := raw.Body.JustAttributes()
	e.diags = append(e.diags, diags...)
	s := &Shim{Rules: map[string]bool{}}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		attr := attrs[name]
		if acp.IsRule(name) {
			if v, _, ok := e.value(attr, cty.Bool); ok {
				s.Rules[name] = v.True()
			}
			continue
		}
		allowed, known := shimSettings[name]
		if !known {
			rules := make([]string, len(acp.Rules))
			for i, r := range acp.Rules {
				rules[i] = string(r)
			}
			e.errorf(attr.NameRange, "Unknown shim argument",
				"%q is neither a rule (%s) nor a setting (late_quiet, late_updates, one_turn, schema_invalid, stdout_noise_limit, mode).",
				name, strings.Join(rules, ", "))
			continue
		}
		switch name {
		case "late_quiet":
			s.LateQuiet, _ = e.duration(attr, ZeroDisables)
		case "stdout_noise_limit":
			if v, _, ok := e.value(attr, cty.Number); ok {
				n, acc := v.AsBigFloat().Int64()
				if acc != 0 || n < 1 {
					e.errorf(attr.Expr.Range(), "Invalid stdout_noise_limit", "stdout_noise_limit must be a whole number of lines, at least 1.")
					continue
				}
				s.NoiseLimit = int(n)
			}
		default:
			v, ok := e.str(attr)
			if !ok {
				continue
			}
			if !slices.Contains(allowed, v) {
				e.errorf(attr.Expr.Range(), "Invalid shim setting", "%s must be one of %s; got %q.", name, strings.Join(allowed, ", "), v)
				continue
			}
			switch name {
			case "mode":
				s.Mode = v
			case "late_updates":
				s.LateUpdates = v
			case "one_turn":
				s.OneTurn = v
			case "schema_invalid":
				s.SchemaInvalid = v
			}
		}
	}
	return s
}
