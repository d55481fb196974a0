//go:build (linux || darwin) && perf

package bridge_test

import (
	"testing"
)

// TestLargeMessagePeakHeap relays a 32 MiB message through the bridge, each
// way on its own and as an echo (the request and its answer in the bridge
// at once), through a WebSocket agent and an agent child, and fails when
// the bridge's peak heap, garbage not yet collected included, is over twice
// the message.
//
// Twice is the floor for a message read from a stream whose length is not
// known up front and handed on as one slice: it is gathered in chunks, then
// copied once into a slice of its size, and for the copy both exist (a
// line's last piece is copied from the read buffer, so a child's way stays
// just under twice). The allowance of 64 KiB covers the WebSocket's chunk
// list and what any message costs besides its bytes (-36 to +21 KiB here).
// Each relay carries two messages in a row: without package reclaim the
// second stacked on the first one's garbage, and the peak reached 3×.
//
// The figure is measured as BenchmarkRelayLarge measures it: bytes in heap
// objects sampled every millisecond, above a start taken after a full
// collection, minus, for the WebSocket agent living in this process, the
// peak of the same exchange made directly with the agent.
func TestLargeMessagePeakHeap(t *testing.T) {
	const size = 32 << 20
	type exchange struct {
		name   string
		relay  func(e *editorEnd, size int) error
		direct func(d *directEnd, size int) error
	}
	for _, transport := range []string{"ws", "child"} {
		for _, x := range []exchange{
			{"to-agent", (*editorEnd).sendLarge, (*directEnd).sendLarge},
			{"to-editor", (*editorEnd).receiveLarge, (*directEnd).receiveLarge},
			{"echo", (*editorEnd).echoLarge, (*directEnd).echoLarge},
		} {
			t.Run(transport+"/"+x.name, func(t *testing.T) {
				defer noLeaks(t)()
				run, url := childRelay, ""
				var baseline float64
				if transport == "ws" {
					agent := startAgent(t)
					defer agent.close(t)
					run, url = bridgeRelay, agent.url
					d := dialDirect(t, url)
					r, err := measureHeap(func() error { return x.direct(d, size) })
					d.close()
					if err != nil {
						t.Fatal(err)
					}
					baseline = r.peak
				}
				e := startRelay(t, "bridge", run, url)
				e.handshake(t)
				// Two in a row: a message must not stack on the garbage of
				// the one before.
				r, err := measureHeap(func() error {
					for range 2 {
						if err := x.relay(e, size); err != nil {
							return err
						}
					}
					return nil
				})
				e.close(t)
				if err != nil {
					t.Fatal(err)
				}
				peak := r.peak - baseline
				t.Logf("peak heap %.4f× the message (%+.0f KiB over twice); agent's share %.0f KiB",
					peak/size, (peak-2*size)/1024, baseline/1024)
				if peak > 2*size+64<<10 {
					t.Errorf("peak heap %.4f× the %d MiB message (%+.0f KiB over twice), want ≤ 2× (+64 KiB)", peak/size, size>>20, (peak-2*size)/1024)
				}
			})
		}
	}
}
