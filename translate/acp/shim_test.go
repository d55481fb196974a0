package acp_test

import (
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/hcldecode"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/translatetest"
	"github.com/hashicorp/hcl/v2"
)

// shimDialect is the acp dialect with the shim in front, its options read
// from a transcript's options.hcl: off = [rules], quiet = "…",
// forward_late, drop_invalid.
var shimDialect = translate.Dialect{
	Name:  "acp",
	Relay: true,
	Configure: func(body hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
		var raw struct {
			Off         []string `hcl:"off,optional"`
			Quiet       string   `hcl:"quiet,optional"`
			ForwardLate bool     `hcl:"forward_late,optional"`
			DropInvalid bool     `hcl:"drop_invalid,optional"`
		}
		if body != nil {
			if diags := hcldecode.DecodeBody(body, nil, &raw); diags.HasErrors() {
				return nil, diags
			}
		}
		opt := acp.ShimOptions{Off: map[acp.Rule]bool{}, ForwardLate: raw.ForwardLate, DropInvalid: raw.DropInvalid}
		for _, r := range raw.Off {
			opt.Off[acp.Rule(r)] = true
		}
		if raw.Quiet != "" {
			d, err := time.ParseDuration(raw.Quiet)
			if err != nil {
				return nil, hcl.Diagnostics{{Severity: hcl.DiagError, Summary: err.Error()}}
			}
			opt.Quiet = d
		}
		return func() translate.Translator { return acp.NewShim(opt) }, nil
	},
}

// TestShimGolden pins every pure rule of the shim, on and off, as
// transcripts (testdata/shim/*.txtar).
func TestShimGolden(t *testing.T) {
	translatetest.Run(t, shimDialect, "testdata/shim/*.txtar")
}

// The relay's own transcripts pass through the shim unchanged (quiet
// period off, since they answer prompts without ticks): the shim never
// changes a compliant stream. (Their agent calls terminal/create although
// the editor advertised no terminal, which unsupported-client-methods
// would answer, so that rule is off here; shim/unsupported-client-methods
// pins it.)
func TestShim_RelayTranscriptsUnchanged(t *testing.T) {
	d := shimDialect
	d.Configure = func(hcl.Body) (func() translate.Translator, hcl.Diagnostics) {
		return func() translate.Translator {
			return acp.NewShim(acp.ShimOptions{Quiet: -1, Off: map[acp.Rule]bool{acp.RuleUnsupportedClientMethods: true}})
		}, nil
	}
	translatetest.Run(t, d, "testdata/relay.txtar")
}
