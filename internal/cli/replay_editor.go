package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
	"github.com/acp-bridge/acp-bridge/toolkit/check"
	"github.com/acp-bridge/acp-bridge/toolkit/trace"
	"github.com/tidwall/gjson"
)

// replayEditor plays the bridge's side of a recorded agent link against a
// live agent and prints, on stdout, every frame where the agent now
// differs from the recording. Exit status 1 when one does.
//
// The recorded agent frames between two frames to send are taken as one
// step: the replay waits for the live answers to the requests the step
// answers (and for the agent's own requests in it) however many updates
// come first, so that the next prompt is never sent before the agent has
// answered the current one. The live agent runs as check runs its agents:
// in a process group of its own, stopped in stages.
func replayEditor(ctx context.Context, o replayOpts, er *trace.EditorReplay) error {
	er.Ignore = o.ignore
	cwd := o.cwd
	if cwd == "" {
		// The recording's directory is usually a temporary one, gone now.
		dir, err := os.MkdirTemp("", "acp-replay-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cwd = dir
	}
	er.Cwd = cwd
	var d check.Dialer = check.URL{URL: o.url}
	if o.url == "" {
		d = check.Command{Args: o.argv}
	}
	conn, err := d.Dial(ctx)
	if err != nil {
		return fmt.Errorf("reaching the live agent: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	frames := make(chan []byte, 1024)
	go func() {
		defer close(frames)
		for {
			b, err := conn.Recv()
			if err != nil {
				return
			}
			frames <- b
		}
	}()

	differs, compared := 0, 0
	report := func(format string, args ...any) {
		differs++
		fmt.Fprintf(os.Stdout, format, args...)
	}
	// recv waits for the next live frame; ok false when there is none.
	recv := func(want []byte) ([]byte, bool) {
		t := time.NewTimer(o.timeout)
		defer t.Stop()
		select {
		case live, ok := <-frames:
			if !ok {
				report("step %d: the agent closed its output; expected\n  %s\n", er.Position(), want)
				if diag := conn.Diagnostics(); diag != "" {
					fmt.Fprint(os.Stderr, diag)
				}
			}
			return live, ok
		case <-t.C:
			report("step %d: the agent sent nothing within %v; expected\n  %s\n", er.Position(), o.timeout, want)
		case <-ctx.Done():
		}
		return nil, false
	}
	compare := func(want, live []byte) {
		compared++
		if diffs := er.Compare(want, live); len(diffs) > 0 {
			report("step %d differs from the recording:\n  expected %s\n  actual   %s\n", er.Position(), want, live)
			for _, d := range diffs {
				fmt.Fprintf(os.Stdout, "    %s\n", d)
			}
		}
	}
loop:
	for {
		frame, toAgent, done := er.Next()
		if done {
			break
		}
		if toAgent {
			if o.speedSet {
				time.Sleep(scaled(er.Gap(), o.speed))
			}
			if err := conn.Send(frame); err != nil {
				report("step %d: could not send %s to the agent: %v\n", er.Position(), frame, err)
				break
			}
			continue
		}
		step := [][]byte{frame}
		for {
			f, ok := er.NextIn()
			if !ok {
				break
			}
			step = append(step, f)
		}
		// The step's anchors are its answers and the agent's requests: the
		// live step is over when each has its live counterpart. The other
		// frames (updates) are compared in order, as many as both have.
		var anchors, others [][]byte
		for _, f := range step {
			if isAnchor(f) {
				anchors = append(anchors, f)
			} else {
				others = append(others, f)
			}
		}
		var liveOthers [][]byte
		for _, a := range anchors {
			for {
				live, ok := recv(a)
				if !ok {
					break loop
				}
				if counterpart(a, live) {
					compare(a, live)
					break
				}
				if isAnchor(live) {
					report("step %d: the agent sent %s where the recording has\n  %s\n", er.Position(), live, a)
					continue
				}
				liveOthers = append(liveOthers, live)
			}
		}
		for len(anchors) == 0 && len(liveOthers) < len(others) {
			live, ok := recv(others[len(liveOthers)])
			if !ok {
				break loop
			}
			liveOthers = append(liveOthers, live)
		}
		compareStep(er, others, liveOthers, compare, report)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if differs > 0 {
		fmt.Fprintf(os.Stdout, "acp-bridge replay: the agent differs from the recording at %d step(s)\n", differs)
		return launch.ReportedError{Err: errors.New("the agent differs from the recording")}
	}
	fmt.Fprintf(os.Stdout, "acp-bridge replay: the agent matches the recording (%d frames compared)\n", compared)
	return nil
}

// compareStep compares a step's recorded updates and notifications with
// the live ones. When both have as many, they are compared in order;
// otherwise they are aligned (longest common subsequence of equal frames)
// so that one extra or missing update is reported as that, not as every
// frame after it differing.
func compareStep(er *trace.EditorReplay, rec, live [][]byte, compare func(want, live []byte), report func(string, ...any)) {
	const maxAlign = 2000 // beyond, an alignment costs too much; compare in order
	if len(rec) == len(live) || len(rec) > maxAlign || len(live) > maxAlign {
		for i := range min(len(rec), len(live)) {
			compare(rec[i], live[i])
		}
		if len(rec) != len(live) {
			report("step %d: the agent sent %d update(s) and notification(s) where the recording has %d\n", er.Position(), len(live), len(rec))
		}
		return
	}
	n, m := len(rec), len(live)
	eq := make([][]bool, n)
	for i := range eq {
		eq[i] = make([]bool, m)
		for j := range eq[i] {
			eq[i][j] = len(er.Compare(rec[i], live[j])) == 0
		}
	}
	l := make([][]int, n+1)
	for i := range l {
		l[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if eq[i][j] {
				l[i][j] = l[i+1][j+1] + 1
			} else {
				l[i][j] = max(l[i+1][j], l[i][j+1])
			}
		}
	}
	report("step %d: the agent sent %d update(s) and notification(s) where the recording has %d\n", er.Position(), m, n)
	for i, j := 0, 0; i < n || j < m; {
		switch {
		case i < n && j < m && eq[i][j]:
			i, j = i+1, j+1
		case j >= m || i < n && l[i+1][j] >= l[i][j+1]:
			fmt.Fprintf(os.Stdout, "    missing: %s\n", rec[i])
			i++
		default:
			fmt.Fprintf(os.Stdout, "    extra:   %s\n", live[j])
			j++
		}
	}
}

// isAnchor reports whether f is a response or a request of the agent's:
// a frame every run of the session has exactly once.
func isAnchor(f []byte) bool {
	return gjson.GetBytes(f, "id").Exists()
}

// counterpart reports whether live stands where the recorded anchor does:
// the answer to the same request, or a request of the same method.
func counterpart(rec, live []byte) bool {
	if m := gjson.GetBytes(rec, "method"); m.Exists() {
		return gjson.GetBytes(live, "method").Str == m.Str && gjson.GetBytes(live, "id").Exists()
	}
	return !gjson.GetBytes(live, "method").Exists() && gjson.GetBytes(live, "id").Raw == gjson.GetBytes(rec, "id").Raw
}
