package translatetest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/acp-bridge/acp-bridge/translate"
)

// FuzzAgent is the body of a dialect's fuzz target for FromAgent. Add seeds
// with f.Add([]byte) first (AgentLines collects them from the golden files),
// then call it:
//
//	func FuzzFromAgent(f *testing.F) {
//		seeds, _ := translatetest.AgentLines("testdata/*.txtar")
//		for _, s := range seeds {
//			f.Add(s)
//		}
//		translatetest.FuzzAgent(f, Dialect, "", setup)
//	}
//
// For each fuzz input FuzzAgent makes a fresh translator (options is the HCL
// options source, "" for none) and replays the input lines of setup, a
// transcript section such as an initialize handshake and a prompt left
// running; setup's expected lines are ignored. It then splits the fuzz input
// at newlines and feeds each line: lines starting with "editor> " or
// "event> " as those transcript inputs (lines the driver cannot feed are
// skipped), every other line to FromAgent as one frame. The target fails on a
// panic or on any invariant violation of the Driver (an answer for a Ref the
// editor never sent or already had answered, invalid or multi-line JSON, a
// malformed session/update or error object…). Requests left unanswered are
// not violations here: the fuzzed frames usually leave the turn running.
func FuzzAgent(f *testing.F, d translate.Dialect, options, setup string) {
	// Hostile seeds every dialect gets: nesting past the limit, bytes that
	// are not UTF-8, a frame cut short.
	f.Add([]byte(strings.Repeat("[", 2*translate.MaxDepth) + "]"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"x\",\"params\":{\"t\":\"\xff\"}}"))
	f.Add([]byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s`))
	f.Helper()
	var optionSrc []byte
	if options != "" {
		optionSrc = []byte(options)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := fuzzOne(d, optionSrc, setup, data); err != nil {
			t.Fatal(err)
		}
	})
}

// fuzzOne runs one fuzz input; the error describes a setup failure or the
// invariant violations.
func fuzzOne(d translate.Dialect, options []byte, setup string, data []byte) error {
	dr, err := NewDriver(d, options, "options.hcl")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(setup, "\n") {
		l = strings.TrimSpace(l)
		if !strings.HasPrefix(l, "editor> ") && !strings.HasPrefix(l, "agent> ") && !strings.HasPrefix(l, "event> ") {
			continue
		}
		if _, err := dr.Feed(l); err != nil {
			return fmt.Errorf("setup: %v", err)
		}
	}
	if p := dr.Problems(); len(p) > 0 {
		return fmt.Errorf("setup: %s", strings.Join(p, "\n"))
	}
	for _, frame := range bytes.Split(data, []byte("\n")) {
		if bytes.HasPrefix(frame, []byte("editor> ")) || bytes.HasPrefix(frame, []byte("event> ")) {
			_, _ = dr.Feed(string(frame))
			continue
		}
		dr.Agent(frame)
	}
	if p := dr.Problems(); len(p) > 0 {
		return fmt.Errorf("input %q:\n%s", data, strings.Join(p, "\n"))
	}
	return nil
}
