//go:build unix

package early

import (
	"os"
	"path"
	"syscall"

	"github.com/acp-bridge/acp-bridge/internal/procs"
)

func init() {
	argv, ok := command(os.Args, os.Environ())
	if !ok || !procs.StdinPollable() {
		return
	}
	started = start(argv)
}

// start starts argv as legacy.Command.Start would (os/exec.Command, then
// Start): found as exec.LookPath finds it, in a process group of its own,
// with the bridge's environment, and pipes for stdin, stdout and stderr.
// Any failure leaves the start to the bridge, which then meets and
// reports it itself.
func start(argv []string) *Process {
	path, ok := lookPath(argv[0])
	if !ok {
		return nil
	}
	var files []*os.File
	pipe := func() (r, w *os.File) {
		r, w, err := os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w
	}
	inR, inW := pipe()
	outR, outW := pipe()
	errR, errW := pipe()
	if len(files) != 6 {
		closeAll(files)
		return nil
	}
	growPipe(outR)
	env := os.Environ()
	proc, err := os.StartProcess(path, argv, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{inR, outW, errW},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		closeAll(files)
		return nil
	}
	inR.Close()
	outW.Close()
	errW.Close()
	return &Process{Proc: proc, Stdin: inW, Stdout: outR, Stderr: errR, path: path, args: argv, env: env}
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// lookPath is exec.LookPath's answer for name, where it is plain: a name
// with a slash is taken as it is (exec.Command looks nothing up), and a
// bare one is looked for in PATH's directories in order, the first
// executable file found; a relative directory's is exec's ErrDot, which
// starts nothing, and ok is false. Take compares the path with what exec
// found, so a difference would cost the head start, not start a wrong
// agent.
func lookPath(name string) (found string, ok bool) {
	for i := range len(name) {
		if name[i] == '/' {
			return name, executable(name)
		}
	}
	list := os.Getenv("PATH")
	for list != "" {
		dir, rest := list, ""
		for i := range len(list) {
			if list[i] == ':' {
				dir, rest = list[:i], list[i+1:]
				break
			}
		}
		list = rest
		if dir == "" {
			dir = "."
		}
		if p := path.Join(dir, name); executable(p) {
			return p, path.IsAbs(p)
		}
	}
	return "", false
}

// executable is exec's test: not a directory, and executable by us.
func executable(file string) bool {
	fi, err := os.Stat(file)
	return err == nil && !fi.IsDir() && syscall.Access(file, 1 /* X_OK */) == nil
}

// Discard stops the agent started early if nothing took it (the bridge
// stopped before serving): its stdin closes, its process group is killed,
// and it is reaped.
func Discard() {
	mu.Lock()
	p := started
	started = nil
	mu.Unlock()
	if p == nil {
		return
	}
	p.Stdin.Close()
	syscall.Kill(-p.Proc.Pid, syscall.SIGKILL)
	p.Proc.Wait()
	p.Stdout.Close()
	p.Stderr.Close()
}
