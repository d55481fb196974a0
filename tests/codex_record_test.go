package tests

// The recorder of real Codex app-server frames: with ACP_BRIDGE_CODEX_RECORD
// set to a directory, TestCodex_Record drives `codex app-server` (no bridge)
// through each flow the codex-app-server dialect translates, against the
// fake Responses API, and writes each flow's frames there, one per line:
// "> " what the client sent, "< " what Codex sent. The golden transcripts
// and FuzzFromAgent seeds of translate/codexapp come from these files
// (translate/codexapp/testdata/frames); re-record them with
//
//	ACP_BRIDGE_CODEX_RECORD=$PWD/translate/codexapp/testdata/frames go test -run TestCodex_Record ./tests

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// appClient speaks the app-server's JSON-RPC (no "jsonrpc" member) over a
// child's stdio and keeps every frame.
type appClient struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser
	mu     sync.Mutex
	frames []string // "> …" sent, "< …" received
	got    []gjson.Result
	cond   *sync.Cond
	nextID int
	// answer, when set, answers the server's requests.
	answer func(req gjson.Result) string
}

func startAppServer(t *testing.T, bin string, env []string, cwd string) *appClient {
	t.Helper()
	c := &appClient{t: t}
	c.cond = sync.NewCond(&c.mu)
	c.cmd = exec.Command(bin, "app-server")
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Dir = cwd
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			line := sc.Text()
			r := gjson.Parse(line)
			c.mu.Lock()
			c.frames = append(c.frames, "< "+line)
			c.got = append(c.got, r)
			answer := c.answer
			c.cond.Broadcast()
			c.mu.Unlock()
			if r.Get("method").Exists() && r.Get("id").Exists() && answer != nil {
				c.send(fmt.Sprintf(`{"id":%s,"result":%s}`, r.Get("id").Raw, answer(r)))
			}
		}
		c.mu.Lock()
		c.got = append(c.got, gjson.Parse(`{"eof":true}`))
		c.cond.Broadcast()
		c.mu.Unlock()
	}()
	t.Cleanup(func() { c.in.Close(); _ = c.cmd.Process.Kill(); _ = c.cmd.Wait() })
	return c
}

func (c *appClient) send(line string) {
	c.mu.Lock()
	c.frames = append(c.frames, "> "+line)
	c.mu.Unlock()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Errorf("writing to codex: %v", err)
	}
}

// call sends a request and waits for its answer.
func (c *appClient) call(method, params string) gjson.Result {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.mu.Unlock()
	c.send(fmt.Sprintf(`{"id":%d,"method":%q,"params":%s}`, id, method, params))
	return c.wait(func(r gjson.Result) bool { return r.Get("id").Int() == int64(id) && !r.Get("method").Exists() })
}

// wait returns the first frame since the start that pred accepts.
func (c *appClient) wait(pred func(gjson.Result) bool) gjson.Result {
	c.t.Helper()
	deadline := time.AfterFunc(2*time.Minute, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	defer deadline.Stop()
	start := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := 0; ; {
		for ; i < len(c.got); i++ {
			if pred(c.got[i]) {
				r := c.got[i]
				c.got = append(c.got[:i:i], c.got[i+1:]...)
				return r
			}
			if c.got[i].Get("eof").Bool() {
				c.t.Fatalf("codex app-server exited; frames:\n%s", strings.Join(c.frames, "\n"))
			}
		}
		if time.Since(start) > 2*time.Minute {
			c.t.Fatalf("no awaited frame from codex in 2m; frames:\n%s", strings.Join(c.frames, "\n"))
		}
		c.cond.Wait()
	}
}

func (c *appClient) method(m string) func(gjson.Result) bool {
	return func(r gjson.Result) bool { return r.Get("method").Str == m }
}

func (c *appClient) transcript() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.frames, "\n") + "\n"
}

func (c *appClient) handshake() {
	c.call("initialize", `{"clientInfo":{"name":"acp-bridge-recorder","version":"0"},"capabilities":{"experimentalApi":true}}`)
	c.send(`{"method":"initialized"}`)
}

func TestCodex_Record(t *testing.T) {
	dir := os.Getenv("ACP_BRIDGE_CODEX_RECORD")
	if dir == "" {
		t.Skip("set ACP_BRIDGE_CODEX_RECORD to a directory to record real Codex app-server frames")
	}
	bin := CodexCLI(t)
	_, env := codexEnv(t)
	ws := t.TempDir()
	save := func(name string, c *appClient) {
		if err := os.WriteFile(filepath.Join(dir, name+".frames"), []byte(c.transcript()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	threadStart := fmt.Sprintf(`{"cwd":%q,"approvalPolicy":"on-request","sandbox":"read-only"}`, ws)
	turn := func(c *appClient, thread, text string) gjson.Result {
		c.call("turn/start", fmt.Sprintf(`{"threadId":%q,"input":[{"type":"text","text":%q}]}`, thread, text))
		return c.wait(c.method("turn/completed"))
	}

	var firstThread string
	t.Run("turn", func(t *testing.T) {
		c := startAppServer(t, bin, env, ws)
		c.handshake()
		c.call("account/read", `{}`)
		c.call("model/list", `{}`)
		firstThread = c.call("thread/start", threadStart).Get("result.thread.id").Str
		turn(c, firstThread, "say hello")
		turn(c, firstThread, "think, then say hello")
		save("turn", c)
	})
	for _, decision := range []string{"accept", "decline", "cancel"} {
		t.Run("command-"+decision, func(t *testing.T) {
			c := startAppServer(t, bin, env, ws)
			c.answer = func(gjson.Result) string { return fmt.Sprintf(`{"decision":%q}`, decision) }
			c.handshake()
			th := c.call("thread/start", threadStart).Get("result.thread.id").Str
			turn(c, th, "run the tool")
			save("command-"+decision, c)
		})
	}
	t.Run("patch", func(t *testing.T) {
		c := startAppServer(t, bin, env, ws)
		c.answer = func(gjson.Result) string { return `{"decision":"accept"}` }
		c.handshake()
		th := c.call("thread/start", threadStart).Get("result.thread.id").Str
		turn(c, th, "patch a file")
		save("patch", c)
	})
	t.Run("interrupt", func(t *testing.T) {
		c := startAppServer(t, bin, env, ws)
		c.handshake()
		th := c.call("thread/start", threadStart).Get("result.thread.id").Str
		turnID := c.call("turn/start", fmt.Sprintf(`{"threadId":%q,"input":[{"type":"text","text":"slow"}]}`, th)).Get("result.turn.id").Str
		c.wait(c.method("item/agentMessage/delta"))
		c.call("turn/interrupt", fmt.Sprintf(`{"threadId":%q,"turnId":%q}`, th, turnID))
		c.wait(c.method("turn/completed"))
		// An interrupt of a turn that is over is refused.
		c.call("turn/interrupt", fmt.Sprintf(`{"threadId":%q,"turnId":%q}`, th, turnID))
		save("interrupt", c)
	})
	t.Run("error", func(t *testing.T) {
		c := startAppServer(t, bin, env, ws)
		c.handshake()
		th := c.call("thread/start", threadStart).Get("result.thread.id").Str
		turn(c, th, "fail please")
		c.call("turn/start", `{"threadId":"no-such-thread","input":[{"type":"text","text":"x"}]}`)
		save("error", c)
	})
	t.Run("resume", func(t *testing.T) {
		if firstThread == "" {
			t.Skip("no thread recorded")
		}
		c := startAppServer(t, bin, env, ws)
		c.handshake()
		c.call("thread/list", `{}`)
		c.call("thread/resume", fmt.Sprintf(`{"threadId":%q}`, firstThread))
		c.call("thread/read", fmt.Sprintf(`{"threadId":%q,"includeTurns":true}`, firstThread))
		save("resume", c)
	})
}
