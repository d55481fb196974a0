package bridge_test

import (
	"context"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/legacy"
	"github.com/acp-bridge/acp-bridge/translate/acp"
)

// storeRelay is bridgeRelay with durable sessions on: every streamed update
// is also appended to a transcript in dir.
func storeRelay(dir string) relay {
	return func(url string, in io.Reader, out io.Writer) error {
		st, err := store.Open(store.Options{Dir: dir})
		if err != nil {
			return err
		}
		defer st.Close()
		newTranslator, diags := acp.Dialect.Configure(nil)
		if diags.HasErrors() {
			return diags
		}
		b := &bridge.Bridge{
			Dialect:       acp.Dialect,
			NewTranslator: newTranslator,
			MaxMessage:    maxMessage,
			Sessions:      &bridge.Durable{Store: st},
			Dial: func(ctx context.Context, _ bridge.Spawn) (bridge.Link, error) {
				conn, err := legacy.WebSocket{URL: url, ReadLimit: maxMessage}.Dial(ctx)
				if err != nil {
					return nil, err
				}
				return conn, nil
			},
		}
		return b.Serve(context.Background(), in, out)
	}
}

// BenchmarkRelayStreamStore streams updates through the bridge with the
// transcript store off and on, interleaved in ten rounds, max(b.N, 200k)
// updates each (20k with -short).
//
// Target: store-ratio (updates/s with the store ÷ without) ≥ 0.9.
func BenchmarkRelayStreamStore(b *testing.B) {
	defer noLeaks(b)()
	agent := startAgent(b)
	defer agent.close(b)
	n := b.N
	if floor := 200_000; testing.Short() {
		n = max(n, floor/10)
	} else {
		n = max(n, floor)
	}
	// A cap above the run's volume, so every update is really written.
	off := startRelay(b, "bridge", bridgeRelay, agent.url)
	defer off.close(b)
	off.handshake(b)
	on := startRelay(b, "bridge+store", storeRelay(b.TempDir()), agent.url)
	defer on.close(b)
	on.handshake(b)

	type variant struct {
		run func(int) error
		dur time.Duration
	}
	vs := []*variant{{run: off.stream}, {run: on.stream}}
	const rounds = 10
	b.ResetTimer()
	for r := range rounds {
		chunk := n / rounds
		if r == rounds-1 {
			chunk = n - chunk*(rounds-1)
		}
		for k := range vs {
			v := vs[(r+k)%len(vs)]
			runtime.GC()
			t0 := time.Now()
			if err := v.run(chunk); err != nil {
				b.Fatal(err)
			}
			v.dur += time.Since(t0)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/vs[0].dur.Seconds(), "off-updates/s")
	b.ReportMetric(float64(n)/vs[1].dur.Seconds(), "store-updates/s")
	b.ReportMetric(vs[0].dur.Seconds()/vs[1].dur.Seconds(), "store-ratio")
}
