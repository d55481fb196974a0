// Package fakerules holds fake agents that speak the formats of the rule
// profiles shipped in translate/rules/profiles, frame for frame as the
// profiles' headers and docs/agent-protocols.md#rule-profiles describe them,
// one file per format. Each checks the frames it receives as strictly as the
// real program would and answers a prompt by its first word:
//
//	hello …  a normal streamed answer
//	tool …   a tool call and its result (formats that have tools)
//	seam     the seam matrix's turn (agent-rpc only)
//	approve  code that waits for approval (Open Interpreter)
//	echo     the answer's text is the exact prompt frame(s) received
//	slow     a turn that runs until it is cancelled (or ends late)
//	fail     the format's error frame
//	die      the connection drops mid-turn
package fakerules

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// conn is one agent connection: lines arrive on a channel (read by a
// goroutine, so a turn can watch for a cancel), frames leave through out.
type conn struct {
	in  chan []byte
	mu  sync.Mutex
	out io.Writer
	opt fakeagent.Options
}

func newConn(r io.Reader, w io.Writer, opt fakeagent.Options) *conn {
	c := &conn{in: make(chan []byte, 64), out: w, opt: opt}
	go c.readLoop(r)
	return c
}

func (c *conn) readLoop(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if s := strings.TrimSpace(string(line)); s != "" {
			c.in <- []byte(s)
		}
		if err != nil {
			close(c.in)
			return
		}
	}
}

// send writes one frame: a string as is, anything else as JSON.
func (c *conn) send(v any) {
	var b []byte
	switch x := v.(type) {
	case string:
		b = []byte(x)
	default:
		b, _ = json.Marshal(v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = c.out.Write(append(b, '\n'))
}

func q(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func word(text string) string {
	// The history primer acp-bridge puts before a re-attached session's
	// first prompt is context, not the script.
	if _, after, ok := strings.Cut(text, "[end of the earlier transcript]"); ok && strings.HasPrefix(text, "[acp-bridge]") {
		text = after
	}
	w, _, _ := strings.Cut(strings.TrimSpace(text), " ")
	return w
}

// RunStdio runs serve on the process's stdio (for the tests' re-exec).
func RunStdio(serve fakeagent.ServeFunc) func() int {
	return func() int {
		err := serve(os.Stdin, os.Stdout, fakeagent.Options{
			Transport: "stdio",
			Die:       func() { os.Exit(3) },
			Close:     func() { os.Stdout.Close(); os.Exit(0) },
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake agent:", err)
			return 1
		}
		return 0
	}
}
