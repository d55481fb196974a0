package acpclient_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/acpclient"
	"github.com/tidwall/gjson"
)

// fakeAgent reads the client's lines and lets the test answer them.
type fakeAgent struct {
	in  *bufio.Reader  // what the client wrote
	out io.WriteCloser // what the client reads
}

func (a *fakeAgent) next(t *testing.T) gjson.Result {
	t.Helper()
	line, err := a.in.ReadString('\n')
	if err != nil {
		t.Fatalf("agent read: %v", err)
	}
	return gjson.Parse(line)
}

func (a *fakeAgent) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(a.out, line+"\n"); err != nil {
		t.Fatalf("agent write: %v", err)
	}
}

func start(t *testing.T, h acpclient.Handler) (*acpclient.Conn, *fakeAgent) {
	t.Helper()
	before := runtime.NumGoroutine()
	toAgentR, toAgentW := io.Pipe()
	fromAgentR, fromAgentW := io.Pipe()
	c := acpclient.New(fromAgentR, toAgentW, h)
	a := &fakeAgent{in: bufio.NewReader(toAgentR), out: fromAgentW}
	t.Cleanup(func() {
		go io.Copy(io.Discard, toAgentR)
		c.Close()
		fromAgentW.Close()
		<-c.Done()
		deadline := time.Now().Add(2 * time.Second)
		for runtime.NumGoroutine() > before+1 { // +1: the drain above
			if time.Now().After(deadline) {
				t.Errorf("goroutines leaked: %d before, %d after", before, runtime.NumGoroutine())
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	return c, a
}

func TestCall_AnswersByIDOutOfOrder(t *testing.T) {
	c, a := start(t, acpclient.Handler{})
	p0, _ := c.Start("first", map[string]int{"n": 0})
	p1, _ := c.Start("second", nil)
	r0, r1 := a.next(t), a.next(t)
	if r0.Get("id").Raw != "0" || r0.Get("method").Str != "first" || r0.Get("params.n").Raw != "0" || r1.Get("params").Exists() {
		t.Fatalf("agent got %s and %s", r0.Raw, r1.Raw)
	}
	a.send(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope","data":{"x":1}}}`)
	a.send(t, `{"jsonrpc":"2.0","id":0,"result":{"ok":true,"_meta":{"k":[1,2.50]}}}`)
	ctx := context.Background()
	_, err := p1.Wait(ctx)
	var rpcErr *acpclient.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32601 || rpcErr.Message != "nope" || string(rpcErr.Data) != `{"x":1}` {
		t.Errorf("second = %v", err)
	}
	res, err := p0.Wait(ctx)
	if err != nil || string(res) != `{"ok":true,"_meta":{"k":[1,2.50]}}` {
		t.Errorf("first = %s, %v; want the raw result byte for byte", res, err)
	}
}

func TestRequestsAndNotificationsInOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	c, a := start(t, acpclient.Handler{
		Notification: func(method string, params json.RawMessage) {
			mu.Lock()
			seen = append(seen, method+" "+gjson.GetBytes(params, "n").Raw)
			mu.Unlock()
		},
		Request: func(method string, params json.RawMessage) (any, *acpclient.Error) {
			mu.Lock()
			seen = append(seen, "req "+method)
			mu.Unlock()
			if method == "fs/read_text_file" {
				return map[string]string{"content": "hi"}, nil
			}
			return nil, &acpclient.Error{Code: -32601, Message: "no " + method}
		},
	})
	_ = c
	for i := range 3 {
		a.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"n":%d}}`, i))
	}
	a.send(t, `{"jsonrpc":"2.0","id":"r1","method":"fs/read_text_file","params":{}}`)
	a.send(t, `{"jsonrpc":"2.0","id":7,"method":"terminal/create","params":{}}`)
	if got := a.next(t); got.Get("id").Raw != `"r1"` || got.Get("result.content").Str != "hi" {
		t.Errorf("answer = %s", got.Raw)
	}
	if got := a.next(t); got.Get("id").Raw != "7" || got.Get("error.code").Int() != -32601 {
		t.Errorf("answer = %s", got.Raw)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "[session/update 0 session/update 1 session/update 2 req fs/read_text_file req terminal/create]"; fmt.Sprint(seen) != want {
		t.Errorf("handled %v, want %s", seen, want)
	}
}

func TestTapSeesBothDirections(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	c, a := start(t, acpclient.Handler{Tap: func(out bool, line []byte) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf("%v %s", out, line))
		mu.Unlock()
	}})
	p, _ := c.Start("x", nil)
	a.next(t)
	a.send(t, `{"jsonrpc":"2.0","id":0,"result":{}}`)
	p.Wait(context.Background())
	mu.Lock()
	defer mu.Unlock()
	want := fmt.Sprint([]string{`true {"jsonrpc":"2.0","id":0,"method":"x"}`, `false {"jsonrpc":"2.0","id":0,"result":{}}`})
	if fmt.Sprint(lines) != want {
		t.Errorf("tap saw %v, want %v", lines, want)
	}
}

func TestCall_ContextAndInputEnd(t *testing.T) {
	c, a := start(t, acpclient.Handler{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Call(ctx, "slow", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Call with an expired ctx = %v", err)
	}
	a.next(t)
	p, _ := c.Start("never", nil)
	a.next(t)
	a.out.Close() // the agent's output ends
	if _, err := p.Wait(context.Background()); !errors.Is(err, acpclient.ErrClosed) {
		t.Errorf("pending call after the agent's output ended = %v, want ErrClosed", err)
	}
	<-c.Done()
}
