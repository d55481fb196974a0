//go:build unix

package legacy_test

import (
	"context"
	"testing"

	"github.com/acp-bridge/acp-bridge/legacy"
)

// BenchmarkProcessRead measures Read of small stdout lines from a child
// that writes them as fast as it can.
func BenchmarkProcessRead(b *testing.B) {
	p, _ := startChild(b, "flood", func(c *legacy.Command) { c.Logger = nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first, err := p.Read(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(first)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := p.Read(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
