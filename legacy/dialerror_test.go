package legacy

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// Dial errors read as one sentence naming the URL, whatever layers net
// wrapped around the cause. Errors that tests cannot provoke reliably (no
// route, no DNS answer, a dial timeout) are built here the way net builds
// them.
func TestDialErrorText(t *testing.T) {
	const where = "ws://agent.example:8765/acp"
	addr := &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8765}
	dial := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: err}
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)),
			"agent unreachable at " + where + ": connection refused"},
		{"network unreachable", dial(os.NewSyscallError("connect", syscall.ENETUNREACH)),
			"agent unreachable at " + where + ": network is unreachable"},
		{"no such host", dial(&net.DNSError{Err: "no such host", Name: "agent.example", Server: "10.0.0.53:53", IsNotFound: true}),
			"agent unreachable at " + where + ": no such host"},
		{"DNS failure", dial(&net.DNSError{Err: "server misbehaving", Name: "agent.example", Server: "10.0.0.53:53"}),
			"agent unreachable at " + where + ": DNS lookup of agent.example: server misbehaving"},
		{"dial timeout", dial(&timeoutError{}),
			"agent unreachable at " + where + ": no answer within 10s"},
		{"handshake timeout", context.DeadlineExceeded,
			"agent at " + where + ": no WebSocket handshake within 10s"},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Addr: addr, Err: os.NewSyscallError("read", syscall.ECONNRESET)},
			"agent at " + where + ": WebSocket handshake failed: connection reset by peer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := dialError(context.Background(), where, 10*time.Second, nil, tc.err)
			if err.Error() != tc.want {
				t.Errorf("dialError = %q, want %q", err, tc.want)
			}
			if !errors.Is(err, tc.err) {
				t.Errorf("dialError does not wrap its cause")
			}
		})
	}
}

type timeoutError struct{}

func (*timeoutError) Error() string   { return "i/o timeout" }
func (*timeoutError) Timeout() bool   { return true }
func (*timeoutError) Temporary() bool { return true }
