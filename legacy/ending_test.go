//go:build unix

package legacy_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/legacy"
)

// TestProcessReadsToEveryEnding drives a child through random sequences
// of what a child's stdout does, then ends it one of the ways a child
// ends, and holds Read to the contract through all of it: every line
// arrives whole and in order (lines of any length, cut anywhere by the
// pipe; a line half written when a Read is cancelled, finished later),
// the lines written just before the end arrive before the error, and the
// error comes within its bound and names the cause: the exit status, a
// closed stdout, a grandchild holding stdout after the exit (500 ms of
// silence), Close while a Read waits, or the Read's own ctx.
func TestProcessReadsToEveryEnding(t *testing.T) {
	endings := []string{"exit", "exit-tail", "closeout", "hold", "close", "cancel"}
	for seed := range 24 {
		ending := endings[seed%len(endings)]
		t.Run(fmt.Sprintf("%d-%s", seed, ending), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), 26))
			p, _ := startChild(t, "script", nil)
			ctx := t.Context()
			n := 0
			line := func() string {
				n++
				size := rng.IntN(200)
				switch rng.IntN(20) {
				case 0:
					size = 64<<10 - 30 + rng.IntN(60) // about a chunk
				case 1:
					size = 100<<10 + rng.IntN(200<<10) // across chunks
				}
				return fmt.Sprintf(`{"n":%d,"pad":"%s"}`, n, strings.Repeat(string(rune('a'+n%26)), size))
			}
			say := func(cmd string) {
				if err := p.Write(ctx, []byte(cmd)); err != nil {
					t.Fatalf("writing %.40q to the child: %v", cmd, err)
				}
			}
			read := func(want string) {
				t.Helper()
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				got, err := p.Read(rctx)
				if err != nil || string(got) != want {
					t.Fatalf("Read = %.60q…, %v; want %.60q…", got, err, want)
				}
			}
			for range 1 + rng.IntN(6) {
				switch rng.IntN(3) {
				case 0, 1: // lines, read as they come
					var lines []string
					for range 1 + rng.IntN(50) {
						lines = append(lines, line())
					}
					written := make(chan error, 1)
					go func() { // (the pipes hold less than the lines)
						for _, l := range lines {
							if err := p.Write(ctx, []byte("line:"+l)); err != nil {
								written <- err
								return
							}
						}
						written <- nil
					}()
					for _, l := range lines {
						read(l)
					}
					if err := <-written; err != nil {
						t.Fatal(err)
					}
				case 2: // half a line, a Read cut short, the rest
					whole := line()
					for len(whole) > 200<<10 { // (the pipe and the pump hold it unread)
						whole = line()
					}
					cut := 1 + rng.IntN(len(whole)-1)
					say("half:" + whole[:cut])
					short, cancel := context.WithTimeout(ctx, time.Duration(1+rng.IntN(30))*time.Millisecond)
					got, err := p.Read(short)
					cancel()
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Fatalf("Read of half a line = %.60q, %v; want it cut short by its ctx", got, err)
					}
					say("rest:" + whole[cut:])
					read(whole)
				}
			}
			var last []string // written just before the end: they arrive first
			for range rng.IntN(20) {
				last = append(last, line())
			}
			if ending == "exit-tail" { // a last line with no newline, then the exit
				last = append(last, line())
			}
			sent := make(chan struct{})
			go func() { // (the pipes hold less than the lines)
				defer close(sent)
				for i, l := range last {
					cmd := "line:"
					if ending == "exit-tail" && i == len(last)-1 {
						cmd = "half:"
					}
					if p.Write(ctx, []byte(cmd+l)) != nil {
						return
					}
				}
				switch ending {
				case "exit":
					p.Write(ctx, []byte("exit:3"))
				case "exit-tail":
					p.Write(ctx, []byte("exit:5"))
				case "closeout":
					p.Write(ctx, []byte("closeout"))
				case "hold":
					p.Write(ctx, []byte("hold"))
				}
			}()

			var wantErr string
			bound := 3 * time.Second
			switch ending {
			case "exit":
				wantErr = "exited with status 3"
			case "exit-tail":
				wantErr = "exited with status 5"
			case "closeout":
				wantErr = "closed its stdout"
			case "hold":
				wantErr = "exited with status 0"
			}
			for _, l := range last {
				read(l)
			}
			<-sent
			start := time.Now()
			var err error
			switch ending {
			case "close":
				done := make(chan error, 1)
				go func() { _, err := p.Read(ctx); done <- err }()
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				go p.Close()
				err = <-done
				if !errors.Is(err, legacy.ErrClosed) {
					t.Fatalf("Read waiting when Close was called = %v, want ErrClosed", err)
				}
				bound = time.Second
			case "cancel":
				whole := line()
				for len(whole) > 200<<10 {
					whole = line()
				}
				say("half:" + whole[:len(whole)/2])
				rctx, cancel := context.WithCancel(ctx)
				time.AfterFunc(time.Duration(rng.IntN(20))*time.Millisecond, cancel)
				if _, err = p.Read(rctx); !errors.Is(err, context.Canceled) {
					t.Fatalf("Read whose ctx was cancelled = %v", err)
				}
				bound = time.Second
				say("rest:" + whole[len(whole)/2:])
				read(whole)
			default:
				ectx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_, err = p.Read(ectx)
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("Read after the %s = %v, want an error saying %q", ending, err, wantErr)
				}
				if _, again := p.Read(ctx); again == nil || again.Error() != err.Error() {
					t.Fatalf("the next Read = %v, want the same error again", again)
				}
			}
			if d := time.Since(start); d > bound {
				t.Fatalf("Read took %v to end after the %s, want under %v", d, ending, bound)
			}
		})
	}
}
