package fakerules

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/acp-bridge/acp-bridge/tests/fakeagent"
)

// Jobq is a made-up job queue (issue 54): the client numbers its jobs and
// every frame names one.
//
//	C→S {"op":"run","job":N,"text":"…"}                   a job
//	S→C {"op":"progress","job":N,"text":"…"}              progress
//	S→C {"op":"done","job":N}                              job over
//	C→S {"op":"abort","job":N}                             stop job N
//	S→C {"op":"fail","job":N,"code":"E_NOJOB","msg":"…"}   no such job
//	S→C {"op":"ping"}, C→S {"op":"pong"}                   keepalive
//	S→C {"op":"tool","job":N,"id":"t1","name":"rm","status":"running"}
//	S→C {"op":"ask","job":N,"ask":"a1"}                    a question
//	C→S {"op":"approve"|"deny","job":N,"ask":"a1"}         its answer
//	S→C {"op":"tool","job":N,"id":"t1","status":"done"|"denied","output":"…"}
//
// A job whose text holds "echo" first sends a progress frame with its
// whole text, "ran: TEXT". A "hello" job sends one progress frame and its
// done frame. A "long" job sends ten progress frames 100 ms apart and is
// stopped by an abort naming it; an abort naming another job is refused
// and the job runs on. A "hang" job sends one progress frame and its done
// frame, then pings every 300 ms until the connection closes. A "delete"
// job opens a tool call and asks; when the answer comes it reports the
// call itself (denied with "user said no", or done with "removed") and is
// done. Any other job is done at once.
func Jobq(r io.Reader, w io.Writer, opt fakeagent.Options) error {
	c := newConn(r, w, opt)
	type msg struct {
		Op   string
		Job  json.Number
		Text string
	}
	frame := func(op string, job json.Number, rest string) string {
		s := `{"op":"` + op + `","job":` + string(job)
		if rest != "" {
			s += "," + rest
		}
		return s + "}"
	}
	for line := range c.in {
		var m msg
		if json.Unmarshal(line, &m) != nil || m.Op != "run" {
			continue
		}
		if strings.Contains(m.Text, "echo") {
			// What the job was given, whole: a test sees whether it
			// carried anything besides the prompt (a chat preamble).
			c.send(frame("progress", m.Job, `"text":`+q("ran: "+m.Text)))
		}
		switch word(m.Text) {
		case "hello":
			c.send(frame("progress", m.Job, `"text":"hello from job `+string(m.Job)+`"`))
			c.send(frame("done", m.Job, ""))
		case "long":
			tick := time.NewTicker(100 * time.Millisecond)
			stopped := false
			for i := 1; i <= 10 && !stopped; {
				select {
				case l, ok := <-c.in:
					if !ok {
						tick.Stop()
						return nil
					}
					var a msg
					if json.Unmarshal(l, &a) != nil || a.Op != "abort" {
						continue
					}
					if a.Job == m.Job {
						stopped = true
						continue
					}
					c.send(frame("fail", a.Job, `"code":"E_NOJOB","msg":"no running job `+string(a.Job)+`"`))
				case <-tick.C:
					c.send(frame("progress", m.Job, `"text":"step `+strconv.Itoa(i)+`"`))
					i++
				}
			}
			tick.Stop()
			c.send(frame("done", m.Job, ""))
		case "hang":
			c.send(frame("progress", m.Job, `"text":"working"`))
			c.send(frame("done", m.Job, ""))
			tick := time.NewTicker(300 * time.Millisecond)
			for {
				select {
				case _, ok := <-c.in:
					if !ok {
						tick.Stop()
						return nil
					}
				case <-tick.C:
					c.send(`{"op":"ping"}`)
				}
			}
		case "delete":
			c.send(frame("tool", m.Job, `"id":"t1","name":"rm","status":"running"`))
			c.send(frame("ask", m.Job, `"ask":"a1"`))
			for l := range c.in {
				var a msg
				if json.Unmarshal(l, &a) != nil || a.Job != m.Job {
					continue
				}
				if a.Op == "deny" {
					c.send(frame("tool", m.Job, `"id":"t1","status":"denied","output":"user said no"`))
				} else if a.Op == "approve" {
					c.send(frame("tool", m.Job, `"id":"t1","status":"done","output":"removed"`))
				} else {
					continue
				}
				c.send(frame("done", m.Job, ""))
				break
			}
		default:
			c.send(frame("done", m.Job, ""))
		}
	}
	return nil
}

// JobqAuth is Jobq behind a greeting: the client's first frame must be
// {"op":"hello","token":TOKEN}, answered {"op":"welcome"}; any other first
// frame is answered {"op":"denied","msg":"invalid token"} and the
// connection ends, as a server that checks credentials does.
func JobqAuth(token string) fakeagent.ServeFunc {
	return func(r io.Reader, w io.Writer, opt fakeagent.Options) error {
		br := bufio.NewReader(r)
		line, err := br.ReadBytes('\n')
		if err != nil {
			return nil
		}
		var hello struct{ Op, Token string }
		if json.Unmarshal(line, &hello) != nil || hello.Op != "hello" || hello.Token != token {
			_, err := w.Write([]byte(`{"op":"denied","msg":"invalid token"}` + "\n"))
			return err
		}
		if _, err := w.Write([]byte(`{"op":"welcome"}` + "\n")); err != nil {
			return err
		}
		return Jobq(br, w, opt)
	}
}
