package cli

import (
	"context"
	"io"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/acpclient"
)

// serveInProcess runs b's engine on pipes, in this process, for an editor
// of the command's own (doctor's checks, prompt's one turn) that h serves,
// and returns that editor's connection and the function that ends both:
// closing the connection ends the engine's input, which then has 5 s to
// finish before it is stopped.
func serveInProcess(ctx context.Context, b *bridge.Bridge, h acpclient.Handler) (*acpclient.Conn, func()) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	serveCtx, stopServe := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		err := b.Serve(serveCtx, inR, outW)
		outW.Close()
		served <- err
	}()
	conn := acpclient.New(outR, inW, h)
	return conn, func() {
		conn.Close()
		t := time.NewTimer(5 * time.Second)
		select {
		case <-served:
		case <-t.C:
			stopServe()
			<-served
		}
		t.Stop()
		stopServe()
		inR.CloseWithError(io.ErrClosedPipe)
	}
}
