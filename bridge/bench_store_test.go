package bridge_test

import (
	"context"
	"io"
	"runtime"
	"slices"
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
// Target: store-ratio (updates/s with the store ÷ without, the median of
// the rounds) ≥ 0.9; store-ratio-total is the same over all rounds.
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
	off := startRelay(b, "bridge", bridgeRelay, agent.url)
	defer off.close(b)
	off.handshake(b)
	on := startRelay(b, "bridge+store", storeRelay(b.TempDir()), agent.url)
	defer on.close(b)
	on.handshake(b)

	type variant struct {
		run      func(int) error
		dur, cpu time.Duration
	}
	vs := []*variant{{run: off.stream}, {run: on.stream}}
	// Each round runs both variants back to back (who goes first
	// alternates) and yields one ratio; the median of the rounds' ratios
	// is what a burst of load on a shared machine moves least.
	const rounds = 20
	ratios := make([]float64, 0, rounds)
	b.ResetTimer()
	for r := range rounds {
		chunk := n / rounds
		if r == rounds-1 {
			chunk = n - chunk*(rounds-1)
		}
		var d [2]time.Duration
		for k := range vs {
			i := (r + k) % len(vs)
			runtime.GC()
			c0, t0 := cpuTime(), time.Now()
			if err := vs[i].run(chunk); err != nil {
				b.Fatal(err)
			}
			d[i] = time.Since(t0)
			vs[i].dur += d[i]
			vs[i].cpu += cpuTime() - c0
		}
		ratios = append(ratios, d[0].Seconds()/d[1].Seconds())
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(float64(n)/vs[0].dur.Seconds(), "off-updates/s")
	b.ReportMetric(float64(n)/vs[1].dur.Seconds(), "store-updates/s")
	b.ReportMetric(vs[0].dur.Seconds()/vs[1].dur.Seconds(), "store-ratio-total")
	b.ReportMetric(ratios[len(ratios)/2], "store-ratio")
	// CPU (this process: relay, agent, editor and the store's writer) is
	// what other processes' load moves least: the store's cost per update,
	// and the throughput ratio it implies on a CPU-bound machine.
	b.ReportMetric(micros(vs[1].cpu-vs[0].cpu)/float64(n), "store-cpu-us/update")
	b.ReportMetric(vs[0].cpu.Seconds()/vs[1].cpu.Seconds(), "store-cpu-ratio")
}
