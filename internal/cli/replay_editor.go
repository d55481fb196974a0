package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/bridge/trace"
	"github.com/gorilla/websocket"
)

// replayEditor plays the bridge's side of a recorded agent link against a
// live agent and prints, on stdout, every frame where the agent now
// differs from the recording. Exit status 1 when one does.
func replayEditor(ctx context.Context, o replayOpts, er *trace.EditorReplay) error {
	er.Ignore = o.ignore
	frames := make(chan []byte, 1024)
	var send func([]byte) error
	var stop func()
	if o.url != "" {
		conn, _, err := websocket.DefaultDialer.DialContext(ctx, o.url, nil)
		if err != nil {
			return fmt.Errorf("dialling the live agent: %w", err)
		}
		go func() {
			defer close(frames)
			for {
				_, b, err := conn.ReadMessage()
				if err != nil {
					return
				}
				frames <- b
			}
		}()
		send = func(b []byte) error { return conn.WriteMessage(websocket.TextMessage, b) }
		stop = func() { conn.Close() }
	} else {
		cmd := exec.CommandContext(ctx, o.argv[0], o.argv[1:]...)
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
			return fmt.Errorf("starting the live agent: %w", err)
		}
		go func() {
			defer close(frames)
			br := bufio.NewReaderSize(out, 64<<10)
			for {
				line, err := br.ReadBytes('\n')
				if line = bytes.TrimSpace(line); len(line) > 0 {
					frames <- line
				}
				if err != nil {
					return
				}
			}
		}()
		send = func(b []byte) error {
			_, err := in.Write(append(b, '\n'))
			return err
		}
		stop = func() {
			in.Close()
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
	}
	defer stop()

	differs, compared := 0, 0
	report := func(format string, args ...any) {
		differs++
		fmt.Fprintf(os.Stdout, format, args...)
	}
loop:
	for {
		frame, toAgent, done := er.Next()
		if done {
			break
		}
		if toAgent {
			if err := send(frame); err != nil {
				report("step %d: could not send %s to the agent: %v\n", er.Position(), frame, err)
				break
			}
			continue
		}
		select {
		case live, ok := <-frames:
			if !ok {
				report("step %d: the agent closed its output; expected\n  %s\n", er.Position(), frame)
				break loop
			}
			compared++
			if diffs := er.Compare(frame, live); len(diffs) > 0 {
				report("step %d differs from the recording:\n  expected %s\n  actual   %s\n", er.Position(), frame, live)
				for _, d := range diffs {
					fmt.Fprintf(os.Stdout, "    %s\n", d)
				}
			}
		case <-time.After(o.timeout):
			report("step %d: the agent sent nothing within %v; expected\n  %s\n", er.Position(), o.timeout, frame)
			break loop
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if differs > 0 {
		fmt.Fprintf(os.Stdout, "acp-bridge replay: the agent differs from the recording at %d step(s)\n", differs)
		return launch.ReportedError{Err: errors.New("the agent differs from the recording")}
	}
	fmt.Fprintf(os.Stdout, "acp-bridge replay: the agent matches the recording (%d frames compared)\n", compared)
	return nil
}
