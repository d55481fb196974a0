// Command naive is the yardstick of the process-level benchmark: the relay
// anyone would write by hand in an afternoon, with none of the bridge's
// guarantees (no validation, no id renumbering, no ordering rules, no
// answers of its own). What the bridge costs beyond it is the price of those
// guarantees, and the benchmark reports it as a ratio to this.
//
//	naive --url ws://HOST:PORT/acp   lines on stdin → text frames, frames → lines on stdout
//	naive -- AGENT [ARGS...]         the agent as a child: bytes copied both ways
//
// One goroutine each way, buffered writes flushed when nothing more is
// waiting to be read.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 3 && os.Args[1] == "--url":
		err = relayWS(os.Args[2])
	case len(os.Args) >= 3 && os.Args[1] == "--":
		err = relayChild(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, "usage: naive --url ws://HOST:PORT/acp | naive -- AGENT [ARGS...]")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "naive:", err)
		os.Exit(1)
	}
}

// flushConn flushes stdout before every read from the socket: when the
// WebSocket reader has to wait for the network, nothing may wait in the
// buffer.
type flushConn struct {
	net.Conn
	flush func()
}

func (c *flushConn) Read(p []byte) (int, error) {
	c.flush()
	return c.Conn.Read(p)
}

// plainWriter hides bufio.Writer's ReadFrom, which would bypass the buffer.
type plainWriter struct{ io.Writer }

func relayWS(url string) error {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	d := websocket.Dialer{
		ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10, HandshakeTimeout: 10 * time.Second,
		NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &flushConn{Conn: c, flush: func() { out.Flush() }}, nil
		},
	}
	c, _, err := d.Dial(url, nil)
	if err != nil {
		return err
	}
	defer c.Close()

	go func() { // editor → agent
		in := bufio.NewReaderSize(os.Stdin, 1<<20)
		var line []byte
		for {
			chunk, err := in.ReadSlice('\n')
			line = append(line, chunk...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
				os.Exit(0)
			}
			for len(line) > 0 && (line[len(line)-1] == '\n' || line[len(line)-1] == '\r') {
				line = line[:len(line)-1]
			}
			if len(line) > 0 {
				if err := c.WriteMessage(websocket.TextMessage, line); err != nil {
					fmt.Fprintln(os.Stderr, "naive: writing to the agent:", err)
					os.Exit(1)
				}
			}
			line = line[:0]
		}
	}()

	pw := plainWriter{out} // agent → editor
	scratch := make([]byte, 32<<10)
	for {
		kind, r, err := c.NextReader()
		if err != nil {
			out.Flush()
			return nil
		}
		if kind != websocket.TextMessage {
			continue
		}
		if _, err := io.CopyBuffer(pw, r, scratch); err != nil {
			return err
		}
		if err := out.WriteByte('\n'); err != nil {
			return err
		}
	}
}

func relayChild(argv []string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { io.Copy(in, os.Stdin); in.Close() }()
	io.Copy(os.Stdout, out)
	return cmd.Wait()
}
