package check

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/acp-bridge/acp-bridge/toolkit/trace"
)

// scenarioKey carries the scenario a connection is dialled for.
type scenarioKey struct{}

func withScenario(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, scenarioKey{}, id)
}

// scenarioOf returns the scenario a Dial is for ("" outside a run).
func scenarioOf(ctx context.Context) string {
	id, _ := ctx.Value(scenarioKey{}).(string)
	return id
}

// EnvTrace is the environment variable of acp-bridge's --trace. With a
// trace directory, check and compare set it for the agents they start,
// so that an acp-bridge under test keeps one trace per process, named
// after the scenario, instead of each process rewriting one file.
const EnvTrace = "ACP_BRIDGE_TRACE"

// bridgeTraceEnv is the environment entry that names the trace of an
// acp-bridge started for scenario under dir.
func bridgeTraceEnv(dir, scenario string) string {
	if scenario == "" {
		scenario = "run"
	}
	return EnvTrace + "=" + filepath.Join(dir, scenario+".bridge-%p.ndjson")
}

// writeTranscript writes msgs, a connection's whole transcript, to
// dir/name.ndjson as trace records of the agent hop (what check sent is
// "out", what the agent sent "in", as in a bridge's trace), so that
// `acp-bridge trace view` shows it and `acp-bridge replay --as agent`
// plays the agent's side. An existing file is replaced: it is the
// transcript of an earlier run of the same scenario.
func writeTranscript(dir, name string, start time.Time, msgs []Msg) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var b []byte
	for _, m := range msgs {
		r := trace.Record{TNs: m.At.Nanoseconds(), Time: start.Add(m.At).Format(time.RFC3339Nano), Hop: "agent", Dir: "in"}
		if m.Out {
			r.Dir = "out"
		}
		trace.Classify(&r, m.Raw)
		line, err := json.Marshal(r)
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	path := filepath.Join(dir, name+".ndjson")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return fmt.Errorf("writing the transcript of %s: %w", name, err)
	}
	return nil
}
