//go:build linux

package nbio_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/internal/nbio"
)

func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	return connPair(t, "tcp", "127.0.0.1:0")
}

func connPair(t *testing.T, network, addr string) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	a, err = net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b = <-done
	if b == nil {
		t.FailNow()
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestOpen_OnlyWhatCannotBlock(t *testing.T) {
	r, w := pipe(t)
	if nbio.OpenFile(r) == nil || nbio.OpenFile(w) == nil {
		t.Error("a pipe from os.Pipe (non-blocking, polled) was refused")
	}
	a, _ := tcpPair(t)
	if nbio.OpenConn(a) == nil {
		t.Error("a TCP connection was refused")
	}
	u, _ := connPair(t, "unix", filepath.Join(t.TempDir(), "s"))
	if nbio.OpenConn(u) == nil {
		t.Error("a Unix connection was refused")
	}

	reg, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	if nbio.OpenFile(reg) != nil {
		t.Error("a regular file was accepted: its calls can wait for the disk")
	}
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	if nbio.OpenFile(null) != nil {
		t.Error("a character device was accepted")
	}
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	blocking := os.NewFile(uintptr(fds[0]), "blocking pipe")
	defer blocking.Close()
	defer syscall.Close(fds[1])
	if nbio.OpenFile(blocking) != nil {
		t.Error("a pipe in blocking mode was accepted: its read would block")
	}
	if nbio.OpenConn(fakeConn{}) != nil {
		t.Error("a net.Conn without a descriptor was accepted")
	}
}

type fakeConn struct{ net.Conn }

// TestStream_BytesArriveWhole is a randomized model test: a writer writes a
// random byte stream in random-sized pieces through File.Write, a reader
// reads it through File.Read into random-sized buffers, on a pipe, a TCP
// and a Unix connection. The stream is far larger than what either holds,
// so both sides wait in the poller again and again (EAGAIN, partial
// writes); what arrives must be what was sent, byte for byte.
func TestStream_BytesArriveWhole(t *testing.T) {
	type ends struct {
		name   string
		r, w   *nbio.File
		closeW func() error // ends the reader's wait when the writer fails
	}
	var cases []ends
	r, w := pipe(t)
	cases = append(cases, ends{"pipe", nbio.OpenFile(r), nbio.OpenFile(w), w.Close})
	a, b := tcpPair(t)
	cases = append(cases, ends{"tcp", nbio.OpenConn(b), nbio.OpenConn(a), a.Close})
	ua, ub := connPair(t, "unix", filepath.Join(t.TempDir(), "s"))
	cases = append(cases, ends{"unix", nbio.OpenConn(ub), nbio.OpenConn(ua), ua.Close})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 4; seed++ {
				rng := rand.New(rand.NewPCG(seed, 7))
				want := make([]byte, 3<<20+rng.IntN(1<<20))
				for i := range want {
					want[i] = byte(rng.Uint32())
				}
				sizes := rand.New(rand.NewPCG(seed, 8))
				errc := make(chan error, 1)
				go func() {
					rest := want
					for len(rest) > 0 {
						k := min(len(rest), 1+sizes.IntN(200<<10))
						n, err := c.w.Write(rest[:k])
						if err != nil || n != k {
							errc <- fmt.Errorf("Write of %d bytes wrote %d: %v", k, n, err)
							c.closeW() // (the reader then meets the end)
							return
						}
						rest = rest[k:]
					}
					errc <- nil
				}()
				got := make([]byte, 0, len(want))
				bufs := rand.New(rand.NewPCG(seed, 9))
				for len(got) < len(want) {
					buf := make([]byte, 1+bufs.IntN(100<<10))
					n, err := c.r.Read(buf)
					if err != nil {
						select {
						case werr := <-errc:
							t.Fatalf("seed %d: %v; Read after %d bytes: %v", seed, werr, len(got), err)
						default:
						}
						t.Fatalf("seed %d: Read after %d bytes: %v", seed, len(got), err)
					}
					if n == 0 || n > len(buf) {
						t.Fatalf("seed %d: Read returned %d for a %d-byte buffer", seed, n, len(buf))
					}
					got = append(got, buf[:n]...)
				}
				if err := <-errc; err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("seed %d: %d bytes arrived, not the %d sent as sent", seed, len(got), len(want))
				}
			}
		})
	}
}

func TestRead_EndsAsTheFileDoes(t *testing.T) {
	r, w := pipe(t)
	f := nbio.OpenFile(r)
	w.Write([]byte("last"))
	w.Close()
	buf := make([]byte, 16)
	if n, err := f.Read(buf); n != 4 || err != nil {
		t.Fatalf("Read = %d, %v; want 4, nil", n, err)
	}
	if n, err := f.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read at the end = %d, %v; want 0, io.EOF", n, err)
	}
	if n, err := f.Read(nil); n != 0 || err != nil {
		t.Fatalf("Read of nothing = %d, %v; want 0, nil as os.File", n, err)
	}

	a, b := tcpPair(t)
	c := nbio.OpenConn(b)
	a.Close()
	if n, err := c.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read of a closed connection = %d, %v; want 0, io.EOF", n, err)
	}
}

// TestRead_ClosedWhileWaiting: closing the file or connection under a
// waiting Read ends it with the error its own Read gives.
func TestRead_ClosedWhileWaiting(t *testing.T) {
	r, _ := pipe(t)
	f := nbio.OpenFile(r)
	a, _ := tcpPair(t)
	c := nbio.OpenConn(a)
	for _, tc := range []struct {
		name  string
		f     *nbio.File
		close func() error
		is    error
	}{{"pipe", f, r.Close, os.ErrClosed}, {"tcp", c, a.Close, net.ErrClosed}} {
		errc := make(chan error, 1)
		go func() {
			_, err := tc.f.Read(make([]byte, 8))
			errc <- err
		}()
		time.Sleep(20 * time.Millisecond)
		tc.close()
		select {
		case err := <-errc:
			if !errors.Is(err, tc.is) {
				t.Errorf("%s: Read after Close = %v, want %v", tc.name, err, tc.is)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Read still waits 5 s after Close", tc.name)
		}
	}
}

// TestDeadlines: the file's or connection's deadlines bound File's waits,
// with the errors they give there.
func TestDeadlines(t *testing.T) {
	r, w := pipe(t)
	fr, fw := nbio.OpenFile(r), nbio.OpenFile(w)
	r.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	start := time.Now()
	_, err := fr.Read(make([]byte, 8))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("pipe Read past its deadline = %v, want os.ErrDeadlineExceeded", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("pipe Read took %v with a 30ms deadline", d)
	}

	w.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	big := make([]byte, 1<<20) // more than the pipe holds: nobody reads
	n, err := fw.Write(big)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n <= 0 || n >= len(big) {
		t.Errorf("pipe Write past its deadline = %d, %v; want part written and os.ErrDeadlineExceeded", n, err)
	}
	var pe *os.PathError
	if !errors.As(err, &pe) {
		t.Errorf("pipe Write's error %T is not an *os.PathError as os.File's", err)
	}

	a, _ := tcpPair(t)
	c := nbio.OpenConn(a)
	a.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	_, err = c.Read(make([]byte, 8))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("TCP Read past its deadline = %v, want a net.Error that is a timeout", err)
	}
}

// TestTryWrite_NeverWaits: on a full pipe TryWrite takes nothing and says
// so at once; on a pipe with some room it takes that much.
func TestTryWrite_NeverWaits(t *testing.T) {
	r, w := pipe(t)
	fw := nbio.OpenFile(w)
	big := make([]byte, 1<<20)
	n, err := fw.TryWrite(big)
	if err != nil || n <= 0 || n >= len(big) {
		t.Fatalf("TryWrite on an empty pipe = %d, %v; want what the pipe holds", n, err)
	}
	held := n
	start := time.Now()
	if n, err := fw.TryWrite(big); n != 0 || err != nil {
		t.Fatalf("TryWrite on a full pipe = %d, %v; want 0, nil", n, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("TryWrite on a full pipe took %v", d)
	}
	if _, err := io.ReadFull(r, make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	if n, err := fw.TryWrite(big); n != 4096 || err != nil {
		t.Fatalf("TryWrite after 4096 bytes were read = %d, %v; want 4096, nil (held %d)", n, err, held)
	}
	r.Close()
	if _, err := fw.TryWrite(big); err != syscall.EPIPE {
		t.Fatalf("TryWrite with no reader = %v, want EPIPE", err)
	}
}

// TestWrite_ErrorsAsTheFile: a write to a pipe nobody reads fails as
// os.File's Write does.
func TestWrite_ErrorsAsTheFile(t *testing.T) {
	r, w := pipe(t)
	fw := nbio.OpenFile(w)
	r.Close()
	_, got := fw.Write([]byte("x"))
	r2, w2 := pipe(t)
	r2.Close()
	_, want := w2.Write([]byte("x"))
	if got == nil || want == nil || got.Error() != want.Error() || !errors.Is(got, syscall.EPIPE) {
		t.Fatalf("Write with no reader = %v, want %v as os.File gives", got, want)
	}
	w.Close()
	if _, err := fw.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Write after Close = %v, want os.ErrClosed", err)
	}
}

// TestReadAlongsideWrite: one goroutine reads a connection while another
// writes it, as the bridge's link and writer do (run it with -race).
func TestReadAlongsideWrite(t *testing.T) {
	a, b := tcpPair(t)
	fa := nbio.OpenConn(a)
	go io.Copy(b, b) // echo
	const total = 2 << 20
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<10)
		for sent := 0; sent < total; sent += len(msg) {
			if _, err := fa.Write(msg); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	got := 0
	buf := make([]byte, 32<<10)
	for got < total {
		n, err := fa.Read(buf)
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		got += n
	}
	wg.Wait()
}
