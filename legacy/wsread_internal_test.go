package legacy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// The agent's side of a connection, written by hand: a handshake answered
// with 101 and then whatever bytes a test gives, frames or not.

// rawAgent listens for one connection, answers its handshake and sends
// stream right after the 101 (in the same write, so the first frames can
// arrive with the response), in writes of at most chunk bytes; then it
// ends its side and reads what the bridge sends until the bridge closes.
// It returns the agent's ws:// URL and a channel closed when it is done.
func rawAgent(t testing.TB, stream []byte, chunk int) (string, <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ln.Close()
		ln.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		h := sha1.Sum([]byte(req.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			base64.StdEncoding.EncodeToString(h[:]) + "\r\n\r\n"
		out := append([]byte(resp), stream...)
		first := min(len(out), len(resp)+chunk)
		if _, err := c.Write(out[:first]); err != nil {
			return
		}
		for out = out[first:]; len(out) > 0; {
			n := min(len(out), chunk)
			if _, err := c.Write(out[:n]); err != nil {
				return
			}
			out = out[n:]
		}
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c)
	}()
	return "ws://" + ln.Addr().String() + "/acp", done
}

// readAll reads messages from an agent sending stream until the
// connection fails, returning the messages and the final error's text.
func readAll(t testing.TB, stream []byte, chunk int, limit int64, gorilla bool) (msgs [][]byte, final string) {
	t.Helper()
	url, done := rawAgent(t, stream, chunk)
	defer func() { <-done }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := WebSocket{URL: url, PongWait: -1, ReadLimit: limit, gorillaReads: gorilla}.Dial(ctx)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	if (c.fr == nil) != gorilla {
		t.Fatalf("gorillaReads %v, but wsReader in use: %v", gorilla, c.fr != nil)
	}
	for {
		m, err := c.Read(ctx)
		if err != nil {
			return msgs, strings.ReplaceAll(err.Error(), url, "URL")
		}
		msgs = append(msgs, m)
	}
}

// frame builds one WebSocket frame as an agent (unmasked) would, with
// its first byte's flags as given.
func frame(b0 byte, payload []byte) []byte {
	var h []byte
	switch n := len(payload); {
	case n < 126:
		h = []byte{b0, byte(n)}
	case n < 1<<16:
		h = binary.BigEndian.AppendUint16([]byte{b0, 126}, uint16(n))
	default:
		h = binary.BigEndian.AppendUint64([]byte{b0, 127}, uint64(n))
	}
	return append(h, payload...)
}

const (
	fin     = 0x80
	opCont  = 0x0
	opText  = 0x1
	opBin   = 0x2
	opClose = 0x8
	opPing  = 0x9
	opPong  = 0xa
)

func join(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// wsSeeds are streams an agent may send, well formed or not.
func wsSeeds() [][]byte {
	msg := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}`)
	big := bytes.Repeat([]byte("x"), 5000)
	closeMsg := func(code uint16, text string) []byte {
		return frame(fin|opClose, append(binary.BigEndian.AppendUint16(nil, code), text...))
	}
	return [][]byte{
		{},
		frame(fin|opText, msg),
		join(frame(fin|opText, msg), frame(fin|opText, msg), frame(fin|opText, nil)),
		join(frame(opText, msg[:10]), frame(fin|opPing, []byte("hi")), frame(opCont, msg[10:20]), frame(fin|opCont, msg[20:])),
		join(frame(fin|opBin, []byte{1, 2, 3}), frame(fin|opText, msg)),
		join(frame(opBin, []byte{1}), frame(fin|opCont, []byte{2}), frame(fin|opText, msg)),
		join(frame(fin|opText, big), frame(fin|opText, msg)),
		join(frame(opText, big), frame(fin|opCont, big)),
		join(frame(fin|opPong, nil), frame(fin|opText, msg), closeMsg(1000, "bye")),
		join(frame(fin|opText, msg), closeMsg(1001, "")),
		frame(fin|opClose, nil),
		frame(fin|opClose, []byte{3}),
		closeMsg(1005, ""),
		closeMsg(4000, "\xff"),
		frame(fin|0x40|opText, msg),
		frame(fin|0x30|opText, msg),
		frame(fin|0x3, msg),
		frame(opPing, nil),
		frame(fin|opPing, bytes.Repeat([]byte("p"), 126)),
		frame(fin|opCont, msg),
		join(frame(opText, msg), frame(fin|opText, msg)),
		{fin | opText, 0x80 | 3, 1, 2, 3, 4, 'a', 'b', 'c'},
		{fin | opText, 127, 0x80, 0, 0, 0, 0, 0, 0, 1, 'x'},
		{fin | opText, 127, 0, 0, 0, 0, 0, 0, 0, 3, 'x'},
		{fin | opText, 126, 0},
		{fin | opText},
		frame(fin|opText, msg)[:20],
	}
}

// FuzzWSReaderAgreesWithGorilla reads each stream an agent may send
// through wsReader and through gorilla's reader, and requires the same
// messages and the same final error, whatever the stream holds and
// however it is split on the way: wsReader must be neither stricter nor
// looser than the reader it replaced.
func FuzzWSReaderAgreesWithGorilla(f *testing.F) {
	for i, s := range wsSeeds() {
		f.Add(s, uint8(1+i*37%200), uint16(100+i*300))
	}
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8, limit uint16) {
		if len(stream) > 1<<20 {
			return
		}
		ours, ourErr := readAll(t, stream, int(chunk)+1, int64(limit)+1, false)
		theirs, theirErr := readAll(t, stream, int(chunk)+1, int64(limit)+1, true)
		if ourErr != theirErr {
			t.Fatalf("final error:\n wsReader: %s\n gorilla:  %s", ourErr, theirErr)
		}
		if len(ours) != len(theirs) {
			t.Fatalf("wsReader read %d messages, gorilla %d", len(ours), len(theirs))
		}
		for i := range ours {
			if !bytes.Equal(ours[i], theirs[i]) {
				t.Fatalf("message %d:\n wsReader: %q\n gorilla:  %q", i, ours[i], theirs[i])
			}
		}
	})
}

// TestWSReaderSeeds checks, beyond agreeing with gorilla, what the seeds
// must give: the messages in order, and errors that say why.
func TestWSReaderSeeds(t *testing.T) {
	msg := `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{}}}`
	seeds := wsSeeds()
	for _, tc := range []struct {
		seed int
		msgs []string
		err  string
	}{
		{0, nil, "closed: 1006 (abnormal closure)"},
		{2, []string{msg, msg, ""}, "1006"},
		{3, []string{msg}, "1006"},
		{4, []string{msg}, "1006"},
		{8, []string{msg}, "closed: 1000 (normal closure): bye"},
		{11, nil, "closed: 1005 (no status)"}, // (gorilla reads a 1-byte close as one without a code)
		{12, nil, "bad close code 1005"},
		{14, nil, "websocket: RSV1 set"},
		{15, nil, "websocket: RSV2 set, RSV3 set"},
		{17, nil, "FIN not set on control"},
		{21, nil, "bad MASK"},
		{22, nil, "larger than the 100000-byte read limit"},
		{23, nil, "1006"},
	} {
		msgs, final := readAll(t, seeds[tc.seed], 7, 100000, false)
		var got []string
		for _, m := range msgs {
			got = append(got, string(m))
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.msgs) || !strings.Contains(final, tc.err) {
			t.Errorf("seed %d: got %q, %q; want %q and an error with %q", tc.seed, got, final, tc.msgs, tc.err)
		}
	}
}

// TestWSReaderKeepsFramesSentWithTheHandshake: an agent that sends its
// first messages in the packet of its 101 response loses none of them to
// gorilla's handshake buffer.
func TestWSReaderKeepsFramesSentWithTheHandshake(t *testing.T) {
	var stream []byte
	var want []string
	for i := range 50 {
		m := fmt.Sprintf(`{"jsonrpc":"2.0","method":"n","params":{"i":%d}}`, i)
		stream = append(stream, frame(fin|opText, []byte(m))...)
		want = append(want, m)
	}
	msgs, final := readAll(t, stream, len(stream), 0, false)
	var got []string
	for _, m := range msgs {
		got = append(got, string(m))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || !strings.Contains(final, "1006") {
		t.Fatalf("got %d messages (%q), %s; want the %d sent", len(got), got, final, len(want))
	}
}

// TestDeadlineConnCutsAtEachHeaderEnd: while headers is set, a read stops
// at the end of each response's header, however the line ends are
// written and split, and the bytes after it come next, in order.
func TestDeadlineConnCutsAtEachHeaderEnd(t *testing.T) {
	stream := "HTTP/1.1 200 OK\r\nA: b\r\n\r\nHTTP/1.1 101 S\nU: w\n\nFRAMES\r\n\r\nmore"
	for split := 1; split <= len(stream); split++ {
		a, b := net.Pipe()
		go func() {
			for s := stream; len(s) > 0; {
				n := min(split, len(s))
				b.Write([]byte(s[:n]))
				s = s[n:]
			}
			b.Close()
		}()
		d := &deadlineConn{Conn: a, headers: true}
		var parts []string
		var cur []byte
		buf := make([]byte, 64)
		for {
			n, err := d.Read(buf)
			cur = append(cur, buf[:n]...)
			if d.headers && (bytes.HasSuffix(cur, []byte("\n\n")) || bytes.HasSuffix(cur, []byte("\r\n\r\n"))) {
				parts = append(parts, string(cur))
				cur = nil
				if len(parts) == 2 {
					d.headers = false
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
		}
		parts = append(parts, string(cur))
		want := []string{"HTTP/1.1 200 OK\r\nA: b\r\n\r\n", "HTTP/1.1 101 S\nU: w\n\n", "FRAMES\r\n\r\nmore"}
		if fmt.Sprint(parts) != fmt.Sprint(want) {
			t.Fatalf("split %d: read %q, want %q", split, parts, want)
		}
		a.Close()
	}
}

// A message of one frame, whose header gives its length, is read into one
// allocation of exactly that size: not gathered in pieces and copied, which
// costs a large message twice its size at the peak. One of two frames,
// whose length is not known up front, still is.
func TestWSReaderReadsOneFrameIntoItsSize(t *testing.T) {
	const n = 4 << 20
	payload := bytes.Repeat([]byte("x"), n)
	stream := append(frame(fin|opText, payload), frame(opText, payload[:n/2])...)
	stream = append(stream, frame(fin|opCont, payload[n/2:])...)
	url, done := rawAgent(t, stream, 1<<20)
	defer func() { <-done }()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := WebSocket{URL: url, PongWait: -1}.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, frames := range []int{1, 2} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := c.Read(ctx)
		runtime.ReadMemStats(&after)
		if err != nil || !bytes.Equal(m, payload) {
			t.Fatalf("the message of %d frames: %d bytes, %v", frames, len(m), err)
		}
		allocated := after.TotalAlloc - before.TotalAlloc
		t.Logf("the message of %d frames: %d allocations, %.2f× its size", frames, after.Mallocs-before.Mallocs, float64(allocated)/n)
		if oneFrame := allocated < n+64<<10; oneFrame != (frames == 1) {
			t.Errorf("the message of %d frames allocated %.2f× its size", frames, float64(allocated)/n)
		}
		if frames == 1 && cap(m) != n {
			t.Errorf("the message of one frame has capacity %d, want its %d bytes", cap(m), n)
		}
	}
}
