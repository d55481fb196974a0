package store

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	modelSeed  = flag.Uint64("store.seed", 0, "TestStore_Model: the seed (0: from the clock)")
	modelSteps = flag.Int("store.steps", 400, "TestStore_Model: operations per run")
	modelRuns  = flag.Int("store.runs", 3, "TestStore_Model: runs, each with its own seed")
)

// TestMain lets the test binary stand in for a second bridge process
// (see childStore).
func TestMain(m *testing.M) {
	if dir := os.Getenv("STORE_TEST_CHILD"); dir != "" {
		serveChild(dir)
		return
	}
	os.Exit(m.Run())
}

// driver is a Store as the model test drives it: in this process, or in a
// child process. Every method returns once its effect is visible to the
// others (Release and Delete once the lock is given up; settle once
// everything queued is written).
type driver interface {
	create(sid string) string
	acquire(sid string) string
	appendPrompt(sid, text string)
	release(sid string)
	remove(sid string) string
	settle()
	pid() int
}

// outcome classifies an error as the model predicts it.
func outcome(err error) string {
	var be *BusyError
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrTaken):
		return "taken"
	case errors.As(err, &be):
		return fmt.Sprintf("busy:%d", be.PID)
	case errors.Is(err, fs.ErrNotExist):
		return "notexist"
	}
	return "error: " + err.Error()
}

type local struct{ s *Store }

func (l local) create(sid string) string { return outcome(l.s.Create(sid, Meta{Cwd: "/w"})) }
func (l local) acquire(sid string) string {
	_, err := l.s.Acquire(sid)
	return outcome(err)
}
func (l local) appendPrompt(sid, text string) {
	l.s.Append(sid, Record{Kind: KindPrompt, Body: prompt(text), Sync: len(text)%2 == 0})
}
func (l local) release(sid string) { l.s.Release(sid); l.s.barrier() }
func (l local) remove(sid string) string {
	return outcome(deleteSession(l.s, sid))
}
func (l local) settle() {
	ch := make(chan struct{})
	if l.s.do(func() { l.s.flushAll(true); close(ch) }) {
		<-ch
	}
}
func (l local) pid() int { return os.Getpid() }

// child is a Store in a child process (this test binary, re-executed),
// driven one command per line.
type child struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

type command struct{ Op, SID, Text string }

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STORE_TEST_CHILD="+dir)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	if got := c.do("ping", "", ""); got != "ok" {
		t.Fatalf("child: %q", got)
	}
	return c
}

func (c *child) do(op, sid, text string) string {
	b, _ := json.Marshal(command{op, sid, text})
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		return "child gone: " + err.Error()
	}
	if !c.out.Scan() {
		return "child gone"
	}
	return c.out.Text()
}

func (c *child) create(sid string) string      { return c.do("create", sid, "") }
func (c *child) acquire(sid string) string     { return c.do("acquire", sid, "") }
func (c *child) appendPrompt(sid, text string) { c.do("append", sid, text) }
func (c *child) release(sid string)            { c.do("release", sid, "") }
func (c *child) remove(sid string) string      { return c.do("delete", sid, "") }
func (c *child) settle()                       { c.do("settle", "", "") }
func (c *child) pid() int                      { return c.cmd.Process.Pid }

// serveChild is the child process: a Store on dir, driven by commands on
// stdin, one answer line each.
func serveChild(dir string) {
	s, err := Open(Options{Dir: dir, FlushEvery: 5 * time.Millisecond})
	if err != nil {
		fmt.Println("error: " + err.Error())
		os.Exit(1)
	}
	l := local{s}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var c command
		json.Unmarshal(in.Bytes(), &c)
		res := "ok"
		switch c.Op {
		case "create":
			res = l.create(c.SID)
		case "acquire":
			res = l.acquire(c.SID)
		case "append":
			l.appendPrompt(c.SID, c.Text)
		case "release":
			l.release(c.SID)
		case "delete":
			res = l.remove(c.SID)
		case "settle":
			l.settle()
		}
		fmt.Println(res)
	}
	s.Close()
}

// model is what the Stores on one directory must agree with.
type model struct {
	prompts map[string][]string // sid → its prompts, for the sessions that exist
	holder  map[string]int      // sid → the driver that holds it
}

// TestStore_Model drives two Stores of this process and one of a child
// process on one state directory through random interleavings of
// Create, Acquire, Append, Release, Delete, Read, List and Taken, and
// checks each outcome, and what each session holds, against a model:
// which ids exist, which prompts each holds, and who holds it. Seeded:
// -store.seed repeats a run, -store.steps and -store.runs make it longer.
func TestStore_Model(t *testing.T) {
	for run := range *modelRuns {
		seed := *modelSeed
		if seed == 0 {
			seed = uint64(time.Now().UnixNano())
		}
		seed += uint64(run)
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runModel(t, seed, *modelSteps) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed))
	dir := filepath.Join(t.TempDir(), "state")
	a := open(t, Options{Dir: dir, FlushEvery: 5 * time.Millisecond})
	b := open(t, Options{Dir: dir, FlushEvery: 5 * time.Millisecond})
	drivers := []driver{local{a}, local{b}, startChild(t, dir)}
	readers := []*Store{a, b}
	ids := []string{"s1", "s2", "s3", "a/b c", strings.Repeat("long-", 40), "x-1"}
	m := model{prompts: map[string][]string{}, holder: map[string]int{}}
	// gone are the ids deleted: never handed out again (tombstones).
	gone := map[string]bool{}
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, after:\n%s\n%s", seed, strings.Join(trace[max(0, len(trace)-15):], "\n"), fmt.Sprintf(format, args...))
	}
	busy := func(sid string) string { return fmt.Sprintf("busy:%d", drivers[m.holder[sid]].pid()) }
	for step := range steps {
		d := rng.IntN(len(drivers))
		sid := ids[rng.IntN(len(ids))]
		_, exists := m.prompts[sid]
		h, held := m.holder[sid]
		op := rng.IntN(10)
		trace = append(trace, fmt.Sprintf("%d: driver %d op %d %.12q (exists %v, held by %d %v)", step, d, op, sid, exists, h, held))
		switch op {
		case 0: // Create
			want := "ok"
			if exists || gone[sid] {
				want = "taken"
			}
			if got := drivers[d].create(sid); got != want {
				fail("Create: %s, want %s", got, want)
			}
			if want == "ok" {
				m.prompts[sid], m.holder[sid] = []string{}, d
			}
		case 1: // Acquire
			want := "ok"
			switch {
			case !exists:
				want = "notexist"
			case held:
				want = busy(sid)
			}
			if got := drivers[d].acquire(sid); got != want {
				fail("Acquire: %s, want %s", got, want)
			}
			if want == "ok" {
				m.holder[sid] = d
			}
		case 2, 3, 4: // Append
			text := fmt.Sprintf("p%d", step)
			drivers[d].appendPrompt(sid, text)
			if held && h == d {
				m.prompts[sid] = append(m.prompts[sid], text)
			}
		case 5: // Release
			drivers[d].release(sid)
			if held && h == d {
				delete(m.holder, sid)
			}
		case 6: // Delete
			want := "ok"
			switch {
			case held && h != d:
				want = busy(sid)
			case !exists:
				want = "notexist"
			}
			if got := drivers[d].remove(sid); got != want {
				fail("Delete: %s, want %s", got, want)
			}
			if want == "ok" {
				delete(m.prompts, sid)
				delete(m.holder, sid)
				gone[sid] = true
			}
		case 7: // Read, by either Store of this process
			if held {
				drivers[h].settle()
			}
			tr, err := load(t, readers[rng.IntN(2)], sid)
			if !exists {
				if !errors.Is(err, fs.ErrNotExist) {
					fail("Read of a session that does not exist: %+v, %v", tr, err)
				}
				break
			}
			if err != nil {
				fail("Read: %v", err)
			}
			var got []string
			for _, r := range tr.Records {
				got = append(got, Title(r.Body))
			}
			if !slices.Equal(got, m.prompts[sid]) || tr.Skipped != 0 || tr.Meta.SessionID != sid {
				fail("Read: prompts %q (skipped %d, id %q), want %q", got, tr.Skipped, tr.Meta.SessionID, m.prompts[sid])
			}
		case 8: // List
			for _, x := range drivers {
				x.settle()
			}
			ms, _ := list(t, readers[rng.IntN(2)], "", "", 0)
			var got, want []string
			for _, x := range ms {
				got = append(got, x.SessionID)
			}
			for x := range m.prompts {
				want = append(want, x)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				fail("List: %q, want %q", got, want)
			}
		case 9: // Taken
			if got := readers[rng.IntN(2)].Taken(sid); got != (exists || gone[sid]) {
				fail("Taken: %v, want %v", got, exists || gone[sid])
			}
		}
	}
}

// A session held by another process is refused to this one, with that
// process's pid, until the process dies: a kill -9 leaves no stale lock.
func TestStore_LockAcrossProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	c := startChild(t, dir)
	if got := c.create("s1"); got != "ok" {
		t.Fatal(got)
	}
	c.appendPrompt("s1", "theirs")
	c.settle()
	_, err := s.Acquire("s1")
	var be *BusyError
	if !errors.As(err, &be) || be.PID != c.pid() || !strings.Contains(err.Error(), fmt.Sprintf("open in another acp-bridge process (pid %d)", c.pid())) {
		t.Fatalf("Acquire of a session another process holds: %v (child pid %d)", err, c.pid())
	}
	if err := deleteSession(s, "s1"); !errors.As(err, &be) {
		t.Fatalf("Delete of a session another process holds: %v", err)
	}
	if err := s.Create("s1", Meta{}); !errors.Is(err, ErrTaken) {
		t.Fatalf("Create: %v", err)
	}
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("mine"), Sync: true})
	c.cmd.Process.Signal(syscall.SIGKILL)
	c.cmd.Wait()
	if _, err := s.Acquire("s1"); err != nil {
		t.Fatalf("Acquire once the holder is killed: %v", err)
	}
	s.Append("s1", Record{Kind: KindPrompt, Body: prompt("now mine"), Sync: true})
	tr, err := load(t, s, "s1")
	// The holder was killed with its turn open: the takeover marks it.
	if err != nil || len(tr.Records) != 3 || Title(tr.Records[0].Body) != "theirs" ||
		tr.Records[1].Kind != KindGap || !strings.Contains(string(tr.Records[1].Body), `"interrupted":true`) || Title(tr.Records[2].Body) != "now mine" {
		t.Fatalf("after the takeover: %q %v", bodies(tr), err)
	}
}
