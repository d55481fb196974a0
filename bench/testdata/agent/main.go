// Command agent is the fake ACP agent of the process-level benchmark: fast
// enough that the relay in front of it is what is measured.
//
//	agent -stdio        one message per line on stdin and stdout
//	agent -ws ADDR      a WebSocket server (path /acp), one message per text
//	                    frame; prints "listening PORT" once ready
//
// It answers initialize, session/new (sessionId "s1") and _bench/echo (the
// params back as {"echo": params}); session/prompt with the text
// "stream N SIZE" streams N agent_message_chunk updates of SIZE bytes of
// text, then ends the turn. Each update is built once and written N times
// through a large buffer, and WebSocket frames are written by hand onto the
// hijacked connection, so the agent's own cost stays far below the relay's.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/gorilla/websocket"
	"github.com/tidwall/gjson"
)

// sink is where one connection's messages go.
type sink interface {
	msg(parts ...[]byte) error    // one message, the concatenation of parts
	repeat(m []byte, n int) error // the same message n times
	flush() error
}

type lineSink struct{ w *bufio.Writer }

func (s *lineSink) msg(parts ...[]byte) error {
	for _, p := range parts {
		s.w.Write(p)
	}
	return s.w.WriteByte('\n')
}

func (s *lineSink) repeat(m []byte, n int) error {
	line := append(append(make([]byte, 0, len(m)+1), m...), '\n')
	for range n {
		if _, err := s.w.Write(line); err != nil {
			return err
		}
	}
	return nil
}

func (s *lineSink) flush() error { return s.w.Flush() }

// frameSink writes unmasked server text frames (RFC 6455 §5.2) itself.
type frameSink struct {
	w   *bufio.Writer
	hdr []byte
}

func header(dst []byte, op byte, n int) []byte {
	dst = append(dst, 0x80|op)
	switch {
	case n < 126:
		return append(dst, byte(n))
	case n <= 0xFFFF:
		return append(dst, 126, byte(n>>8), byte(n))
	}
	dst = append(dst, 127)
	for shift := 56; shift >= 0; shift -= 8 {
		dst = append(dst, byte(uint64(n)>>shift))
	}
	return dst
}

func (s *frameSink) frame(op byte, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	s.hdr = header(s.hdr[:0], op, n)
	s.w.Write(s.hdr)
	var err error
	for _, p := range parts {
		_, err = s.w.Write(p)
	}
	return err
}

func (s *frameSink) msg(parts ...[]byte) error { return s.frame(websocket.TextMessage, parts...) }

func (s *frameSink) repeat(m []byte, n int) error {
	f := append(header(nil, websocket.TextMessage, len(m)), m...)
	for range n {
		if _, err := s.w.Write(f); err != nil {
			return err
		}
	}
	return nil
}

func (s *frameSink) flush() error { return s.w.Flush() }

var (
	head   = []byte(`{"jsonrpc":"2.0","id":`)
	result = []byte(`,"result":`)
	echo   = []byte(`,"result":{"echo":`)
	close1 = []byte(`}`)
	close2 = []byte(`}}`)
)

func updateLine(sid string, size int) []byte {
	text := make([]byte, size)
	const alpha = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	for i := range text {
		text[i] = alpha[i%len(alpha)]
	}
	return []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":` + strconv.Quote(sid) +
		`,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` + string(text) + `"}}}}`)
}

// handle answers one message; the answers are flushed by the caller.
func handle(line []byte, out sink) error {
	id := []byte(gjson.GetBytes(line, "id").Raw)
	method := gjson.GetBytes(line, "method").Str
	if len(id) == 0 || method == "" {
		return nil // a notification, or an answer to nothing we asked
	}
	switch method {
	case "initialize":
		return out.msg(head, id, result, []byte(`{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}`), close1)
	case "session/new":
		return out.msg(head, id, result, []byte(`{"sessionId":"s1"}`), close1)
	case "_bench/echo":
		params := []byte(gjson.GetBytes(line, "params").Raw)
		if len(params) == 0 {
			params = []byte("null")
		}
		return out.msg(head, id, echo, params, close2)
	case "session/prompt":
		n, size := 1, 0
		if f := strings.Fields(gjson.GetBytes(line, "params.prompt.0.text").Str); len(f) == 3 && f[0] == "stream" {
			n, _ = strconv.Atoi(f[1])
			size, _ = strconv.Atoi(f[2])
		}
		if err := out.repeat(updateLine(gjson.GetBytes(line, "params.sessionId").Str, size), n); err != nil {
			return err
		}
		return out.msg(head, id, result, []byte(`{"stopReason":"end_turn"}`), close1)
	}
	return out.msg(head, id, []byte(`,"error":{"code":-32601,"message":"Method not found"}`), close1)
}

func serveStdio() error {
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := &lineSink{w: bufio.NewWriterSize(os.Stdout, 256<<10)}
	var line []byte
	for {
		chunk, err := in.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return nil
		}
		if err := handle(line, out); err != nil {
			return err
		}
		if err := out.flush(); err != nil {
			return err
		}
		line = line[:0]
		if cap(line) > 4<<20 {
			line = nil // a huge message's buffer is not kept
		}
	}
}

func serveConn(c *websocket.Conn) {
	defer c.Close()
	out := &frameSink{w: bufio.NewWriterSize(c.UnderlyingConn(), 256<<10)}
	c.SetPingHandler(func(data string) error {
		out.frame(websocket.PongMessage, []byte(data))
		return out.flush()
	})
	c.SetCloseHandler(func(code int, _ string) error {
		out.frame(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""))
		return out.flush()
	})
	for {
		kind, r, err := c.NextReader()
		if err != nil {
			return
		}
		msg, err := io.ReadAll(r)
		if err != nil {
			return
		}
		if kind != websocket.TextMessage {
			continue
		}
		if handle(msg, out) != nil || out.flush() != nil {
			return
		}
	}
}

func serveWS(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	up := websocket.Upgrader{ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10}
	http.HandleFunc("/acp", func(w http.ResponseWriter, r *http.Request) {
		if c, err := up.Upgrade(w, r, nil); err == nil {
			serveConn(c)
		}
	})
	fmt.Printf("listening %d\n", ln.Addr().(*net.TCPAddr).Port)
	return http.Serve(ln, nil)
}

func main() {
	stdio := flag.Bool("stdio", false, "serve on stdin and stdout")
	ws := flag.String("ws", "", "serve WebSocket connections on this address")
	flag.Parse()
	var err error
	switch {
	case *stdio:
		err = serveStdio()
	case *ws != "":
		err = serveWS(*ws)
	default:
		fmt.Fprintln(os.Stderr, "usage: agent -stdio | agent -ws ADDR")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}
