//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || aix

package cli

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge/launch"
)

// Crash output is scrubbed of secrets by a second process.
//
// The loggers scrub what they write, but a Go panic or a runtime fatal error
// writes its message and stacks straight to fd 2, bypassing every writer in
// the program, and a panic's value can hold a header or a token. Nothing in
// a dying process can filter that, so when the agent has secrets,
// scrubStderr starts this binary again as a filter (stderrFilterCommand),
// hands it the secrets on a pipe of their own (never argv or the
// environment, which other users can read), and points fd 2 at a pipe into
// it. Everything written to stderr from then on, logs, stray stdout writes
// (see reserveStdout), panics, fatal errors and race reports, passes the
// filter, which writes it scrubbed to the real stderr and exits when every
// writer has closed the pipe: when the bridge has exited, however it died.
//
// The filter is on the stderr path only and passes each line on as soon as
// it has it, so serving never waits for it. It ignores the signals a
// terminal or an editor sends the process group, so that it is still there
// to pass on the bridge's last words; if it dies all the same, the bridge's
// stderr writes fail (SIGPIPE is caught) and serving goes on.

// stderrFilterCommand is the hidden first argument that makes the binary the
// filter. It is not a subcommand of the CLI: it is never shown, and it reads
// its input only from the descriptors the bridge hands it.
const stderrFilterCommand = "__stderr-filter"

// The filter's descriptors: the stream to scrub, then the secrets.
const (
	filterInFD      = 3
	filterSecretsFD = 4
)

// crashTestHook, when set (only in a binary built with the crashtest tag,
// see crashtest.go), is called with the secrets once the filter is in
// place.
var crashTestHook func(secrets []string)

// scrubStderr routes fd 2 through a scrubbing filter process when there are
// secrets, and returns what to call when the bridge is done: it points fd 2
// (and fd 1, if reserveStdout aimed it at the filter too) back at the real
// stderr, which ends the filter's input, and waits a moment for the filter
// to write the rest, so that the output is complete when the bridge exits.
// A crash skips that; the filter then ends when the process's descriptors
// are closed, a moment after it. A filter that cannot be started is
// reported on stderr; the bridge then serves with its logs scrubbed but not
// its crash output.
func scrubStderr(secrets []string) (done func()) {
	if len(launch.NewScrubber(secrets...).Values()) == 0 {
		return func() {}
	}
	done, err := startStderrFilter(secrets)
	if err != nil {
		fmt.Fprintf(os.Stderr, "acp-bridge: warning: crash output will not be scrubbed of secrets: %v\n", err)
		return func() {}
	}
	if crashTestHook != nil {
		crashTestHook(secrets)
	}
	return done
}

// filterWait bounds how long the bridge waits for the filter at the end: it
// needs milliseconds, unless something else still holds its input.
const filterWait = time.Second

func startStderrFilter(secrets []string) (done func(), err error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// The real stderr, kept (close-on-exec) to go back to at the end.
	syscall.ForkLock.RLock()
	realStderr, err := syscall.Dup(2)
	if err == nil {
		syscall.CloseOnExec(realStderr)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, err
	}
	dataR, dataW, err := os.Pipe()
	if err != nil {
		syscall.Close(realStderr)
		return nil, err
	}
	defer dataR.Close()
	defer dataW.Close()
	secretsR, secretsW, err := os.Pipe()
	if err != nil {
		syscall.Close(realStderr)
		return nil, err
	}
	defer secretsR.Close()
	defer secretsW.Close()
	cmd := exec.Command(exe, stderrFilterCommand)
	cmd.Stderr = os.Stderr // the real one, before fd 2 is replaced
	cmd.ExtraFiles = []*os.File{dataR, secretsR}
	if err := cmd.Start(); err != nil {
		syscall.Close(realStderr)
		return nil, fmt.Errorf("start %s %s: %w", exe, stderrFilterCommand, err)
	}
	// Waited for (briefly) only at the end: on a crash it outlives the
	// bridge by the moment it takes to write the rest.
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	secretsW.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := writeSecrets(secretsW, secrets); err != nil {
		syscall.Close(realStderr)
		return nil, fmt.Errorf("hand the secrets to the filter: %w", err)
	}
	secretsW.Close()
	// A filter that dies must not take the bridge with it: with SIGPIPE
	// caught, a write to a broken fd 2 fails instead of killing.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	var pipe syscall.Stat_t
	if err := syscall.Fstat(int(dataW.Fd()), &pipe); err != nil {
		syscall.Close(realStderr)
		return nil, err
	}
	if err := dup2(int(dataW.Fd()), 2); err != nil {
		syscall.Close(realStderr)
		return nil, fmt.Errorf("point stderr at the filter: %w", err)
	}
	return func() {
		var st syscall.Stat_t
		if syscall.Fstat(1, &st) == nil && st.Dev == pipe.Dev && st.Ino == pipe.Ino {
			_ = dup2(realStderr, 1)
		}
		_ = dup2(realStderr, 2)
		syscall.Close(realStderr)
		select {
		case <-exited:
		case <-time.After(filterWait):
		}
	}, nil
}

// writeSecrets writes each secret as a 4-byte big-endian length and its bytes.
func writeSecrets(w io.Writer, secrets []string) error {
	var buf []byte
	for _, s := range secrets {
		buf = binary.BigEndian.AppendUint32(buf, uint32(len(s)))
		buf = append(buf, s...)
	}
	_, err := w.Write(buf)
	return err
}

func readSecrets(r io.Reader) ([]string, error) {
	var secrets []string
	for {
		var n [4]byte
		if _, err := io.ReadFull(r, n[:]); errors.Is(err, io.EOF) {
			return secrets, nil
		} else if err != nil {
			return nil, err
		}
		s := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(r, s); err != nil {
			return nil, err
		}
		secrets = append(secrets, string(s))
	}
}

// stderrFilterMain is the filter process: it copies fd 3 to stderr with the
// secrets read from fd 4 scrubbed, until every writer of fd 3 has closed it.
func stderrFilterMain() int {
	// The bridge outlives a Ctrl-C or a SIGTERM to the process group by
	// its shutdown, and a SIGQUIT's stack dump comes this way: stay until
	// the end of input. Output to a closed stderr is dropped, not fatal.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	in := os.NewFile(filterInFD, "stderr of acp-bridge")
	secretsIn := os.NewFile(filterSecretsFD, "secrets")
	if in == nil || secretsIn == nil {
		fmt.Fprintln(os.Stderr, "acp-bridge: internal command, not for use")
		return 2
	}
	secrets, err := readSecrets(secretsIn)
	secretsIn.Close()
	if err != nil {
		// Without the secrets nothing may pass: drain so the bridge never
		// blocks on stderr, and say why once.
		fmt.Fprintf(os.Stderr, "acp-bridge: stderr filter: reading the secrets: %v; stderr is dropped\n", err)
		io.Copy(io.Discard, in)
		return 1
	}
	out := launch.NewStreamScrubber(os.Stderr, secrets...)
	buf := make([]byte, 32<<10)
	failed := false
	for {
		n, err := in.Read(buf)
		if n > 0 && !failed {
			if _, werr := out.Write(buf[:n]); werr != nil {
				failed = true // stderr is gone: keep draining, so writers never block
			}
		}
		if err != nil {
			if !failed {
				out.Flush()
			}
			return 0
		}
	}
}
