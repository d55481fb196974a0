package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/acp-bridge/acp-bridge/toolkit/trace"
)

// recordTrace runs a session with a normal turn and an ignored cancel
// through the bridge with --trace, and returns the trace's path.
func recordTrace(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "session.trace")
	e := NewEditor(t, ChildTransport("acp"), EditorOptions{Args: []string{"--trace", path, "--cancel-grace", "300ms"}})
	sid := e.Start(t)
	if _, err := e.Prompt(ctxT(t), sid, "hello"); err != nil {
		t.Fatal(err)
	}
	done := promptAsync(ctxT(t), e, sid, "ignore-cancel")
	waitUntil(t, WaitTimeout, "tick-1", func() bool { return slices.Contains(e.Fake.Chunks(sid), "tick-1") })
	if err := e.Conn.Cancel(ctxT(t), acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	if r := await(t, done, "cancelled prompt"); r.err != nil || r.res.StopReason != acp.StopReasonCancelled {
		t.Fatalf("cancelled prompt: %+v, %v", r.res, r.err)
	}
	stopBridge(t, e.Bridge)
	return path
}

// traceView runs `acp-bridge trace view` on path and returns the page.
func traceView(t *testing.T, path string) (string, []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "trace.html")
	cmd := exec.Command(BridgeBin, "trace", "view", path, "-o", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("trace view: %v\n%s", err, b)
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return out, page
}

// The page stands alone: nothing is fetched from anywhere.
func TestTraceView_SelfContained(t *testing.T) {
	t.Parallel()
	_, page := traceView(t, recordTrace(t))
	for _, bad := range []string{"http://", "https://", " src=", "<link", "@import"} {
		if bytes.Contains(page, []byte(bad)) {
			t.Errorf("page contains %q: it must not load anything", bad)
		}
	}
}

// The view in a real headless Chromium: three lanes, one arrow per message
// and one note per annotation, a click shows the message's JSON and marks
// its response, the method filter hides the rest, and it renders.
func TestTraceView_Browser(t *testing.T) {
	t.Parallel()
	driver, err := exec.LookPath("chromedriver")
	if err != nil {
		t.Skip("install chromium and chromium-driver (apt-get install chromium chromium-driver) to run this test")
	}
	path := recordTrace(t)
	recs, err := trace.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := traceView(t, path)

	wd := startWebDriver(t, driver)
	wd.call(t, "POST", "/url", map[string]any{"url": "file://" + page}, nil)

	if n := len(wd.find(t, ".lane")); n != 3 {
		t.Errorf("%d lanes, want 3 (editor, bridge, agent)", n)
	}
	var messages, notes []int
	for i, r := range recs {
		if r.Kind == trace.KindNote {
			notes = append(notes, i)
		} else {
			messages = append(messages, i)
		}
	}
	arrows := wd.find(t, ".arrow")
	if len(arrows) != len(messages) {
		t.Errorf("%d arrows, want one per message record: %d", len(arrows), len(messages))
	}
	if n := len(wd.find(t, ".note")); n != len(notes) || n == 0 {
		t.Errorf("%d notes drawn, want %d (at least the cancel-grace one)", n, len(notes))
	}
	// The note sits on the bridge lane: its centre is the bridge lane's x.
	var centres []float64
	wd.call(t, "POST", "/execute/sync", map[string]any{"script": `
		const c = (el) => { const r = el.getBoundingClientRect(); return r.left + r.width / 2; };
		return [c(document.querySelector(".lane.bridge")), c(document.querySelector(".note"))];`, "args": []any{}}, &centres)
	if len(centres) != 2 || centres[0]-centres[1] > 3 || centres[1]-centres[0] > 3 {
		t.Errorf("note centre vs bridge lane x: %v", centres)
	}

	// Click the editor's session/prompt request.
	prompt, answer := -1, -1
	for _, i := range messages {
		r := recs[i]
		if prompt < 0 && r.Hop == "editor" && r.Dir == "in" && r.Method == "session/prompt" {
			prompt = i
		}
		if prompt >= 0 && answer < 0 && r.Hop == "editor" && r.Dir == "out" && r.Kind == "response" && bytes.Equal(r.ID, recs[prompt].ID) {
			answer = i
		}
	}
	if prompt < 0 || answer < 0 {
		t.Fatalf("trace lacks the prompt (%d) or its answer (%d)", prompt, answer)
	}
	el := wd.find(t, fmt.Sprintf("#r%d", prompt))
	if len(el) != 1 {
		t.Fatalf("no arrow #r%d", prompt)
	}
	wd.call(t, "POST", "/element/"+el[0]+"/click", map[string]any{}, nil)
	var shown string
	wd.call(t, "POST", "/execute/sync", map[string]any{"script": `return document.getElementById("json").textContent`, "args": []any{}}, &shown)
	var want bytes.Buffer
	if err := json.Indent(&want, recs[prompt].Msg, "", "  "); err != nil {
		t.Fatal(err)
	}
	if shown != want.String() {
		t.Errorf("#json shows\n%s\nwant\n%s", shown, want.String())
	}
	var paired []string
	wd.call(t, "POST", "/execute/sync", map[string]any{"script": `return [...document.querySelectorAll(".paired")].map(e => e.id)`, "args": []any{}}, &paired)
	if len(paired) != 1 || paired[0] != fmt.Sprintf("r%d", answer) {
		t.Errorf("after clicking the prompt the paired arrows are %v, want its answer r%d", paired, answer)
	}

	// The method filter leaves the prompts and their answers.
	in := wd.find(t, "#filter-method")
	wd.call(t, "POST", "/element/"+in[0]+"/value", map[string]any{"text": "session/prompt"}, nil)
	var visible int
	wd.call(t, "POST", "/execute/sync", map[string]any{"script": `return document.querySelectorAll(".row:not(.hidden) .arrow").length`, "args": []any{}}, &visible)
	wantVisible := 0
	for _, i := range messages {
		if recs[i].Method == "session/prompt" {
			wantVisible++
			for _, j := range messages {
				if j > i && (recs[j].Kind == "response" || recs[j].Kind == "error") && recs[j].Hop == recs[i].Hop &&
					recs[j].Dir != recs[i].Dir && recs[j].Link == recs[i].Link && bytes.Equal(recs[j].ID, recs[i].ID) {
					wantVisible++
					break
				}
			}
		}
	}
	if visible != wantVisible || visible == len(messages) {
		t.Errorf("method filter leaves %d arrows, want %d of %d", visible, wantVisible, len(messages))
	}

	var shot string
	wd.call(t, "GET", "/screenshot", nil, &shot)
	raw, err := base64.StdEncoding.DecodeString(shot)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "trace.png")
	if err := os.WriteFile(file, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("screenshot does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
		t.Errorf("screenshot is %v", b)
	}
}

// A trace of 50,000 messages is one page a browser loads in seconds: it
// holds only the rows in view (and a margin), scrolling draws the rest,
// and clicking the last response brings its request, 50,000 rows up,
// into view. The test reports the times; it asserts only generous bounds.
func TestTraceView_Browser50k(t *testing.T) {
	t.Parallel()
	driver, err := exec.LookPath("chromedriver")
	if err != nil {
		t.Skip("install chromium and chromium-driver (apt-get install chromium chromium-driver) to run this test")
	}
	const n = 50000
	path := filepath.Join(t.TempDir(), "big.trace")
	var b bytes.Buffer
	b.WriteString(`{"t_ns":0,"hop":"editor","dir":"in","kind":"request","method":"session/prompt","id":1,"session":"s","msg":{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}}` + "\n")
	for i := 1; i < n-1; i++ {
		fmt.Fprintf(&b, `{"t_ns":%d,"hop":"editor","dir":"out","kind":"notification","method":"session/update","session":"s","msg":{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"chunk %d of the model's answer"}}}}}`+"\n", i*1000, i)
	}
	answer := `{"jsonrpc":"2.0","id":1,"result":{"stopReason":"end_turn"}}`
	fmt.Fprintf(&b, `{"t_ns":%d,"hop":"editor","dir":"out","kind":"response","id":1,"msg":%s}`+"\n", n*1000, answer)
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	page, html := traceView(t, path)
	write := time.Since(start)
	if len(html) > 15<<20 {
		t.Errorf("the page of %d updates is %d bytes", n, len(html))
	}

	wd := startWebDriver(t, driver)
	eval := func(script string, value any) {
		t.Helper()
		wd.call(t, "POST", "/execute/sync", map[string]any{"script": script, "args": []any{}}, value)
	}
	// waitFor polls script until it returns true.
	waitFor := func(what, script string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			var ok bool
			eval(script, &ok)
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 60 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	start = time.Now()
	wd.call(t, "POST", "/url", map[string]any{"url": "file://" + page}, nil)
	waitFor("the first rows", `return document.getElementById("r0") !== null`)
	load := time.Since(start)

	var rows int
	eval(`return document.querySelectorAll(".row").length`, &rows)
	if rows == 0 || rows > 300 {
		t.Errorf("the document holds %d rows of %d, want at most a few hundred", rows, n)
	}

	// Scroll to the end, click the answer: its request comes into view.
	start = time.Now()
	eval(`window.scrollTo(0, document.documentElement.scrollHeight); return true`, nil)
	last := fmt.Sprintf("r%d", n-1)
	waitFor("the last row", `return document.getElementById("`+last+`") !== null`)
	eval(`return document.querySelectorAll(".row").length`, &rows)
	if rows > 300 {
		t.Errorf("at the end the document holds %d rows", rows)
	}
	el := wd.find(t, "#"+last)
	if len(el) != 1 {
		t.Fatalf("no arrow #%s", last)
	}
	var label string
	eval(`return document.querySelector("#`+last+` .label").textContent`, &label)
	if !strings.HasPrefix(label, "result #1 · ") {
		t.Errorf("the answer is labelled %q, want its latency", label)
	}
	wd.call(t, "POST", "/element/"+el[0]+"/click", map[string]any{}, nil)
	waitFor("the request in view", `const el = document.getElementById("r0");
		if (!el) return false;
		const r = el.getBoundingClientRect(), bar = document.querySelector("header").getBoundingClientRect().bottom;
		return r.top >= bar && r.bottom <= window.innerHeight && el.classList.contains("paired");`)
	jump := time.Since(start)

	var shown string
	eval(`return document.getElementById("json").textContent`, &shown)
	var want bytes.Buffer
	if err := json.Indent(&want, []byte(answer), "", "  "); err != nil {
		t.Fatal(err)
	}
	if shown != want.String() {
		t.Errorf("#json shows\n%s\nwant\n%s", shown, want.String())
	}
	// The page indents a message as json.Indent does, and cuts a long one.
	for _, msg := range []string{`{"a":[1,2,{"b":"c\"]}\\"}],"e":{},"f":[ ], "g" : { "h" : null } }`, `"s"`, `[[[]]]`, `{"t":"é 😀 \u2028"}`} {
		var got string
		wd.call(t, "POST", "/execute/sync", map[string]any{"script": `return indent(arguments[0])`, "args": []any{msg}}, &got)
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(msg), "", "  "); err != nil {
			t.Fatal(err)
		}
		if got != want.String() {
			t.Errorf("the page indents %s as\n%s\nwant\n%s", msg, got, want.String())
		}
	}
	var cut bool
	eval(`const s = indent('{"a":"' + "x".repeat(2 << 20) + '"}'); return s.length < (1 << 20) + 100 && s.endsWith("characters")`, &cut)
	if !cut {
		t.Error("the page does not cut a message past 1 MiB")
	}

	build := ""
	if raceEnabled {
		build = " (by a -race build)"
	}
	t.Logf("%d records: a %.1f MB page written in %v%s; first rows drawn %v after navigating; scroll to the end, click, request in view: %v",
		n, float64(len(html))/(1<<20), write.Round(time.Millisecond), build, load.Round(time.Millisecond), jump.Round(time.Millisecond))
	if load > 30*time.Second {
		t.Errorf("the page took %v to load", load)
	}
}

// webDriver is a W3C WebDriver session on a chromedriver.
type webDriver struct {
	base string // http://127.0.0.1:PORT/session/ID
}

// startWebDriver runs chromedriver and opens a headless Chromium session;
// both end with the test.
func startWebDriver(t *testing.T, driver string) *webDriver {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var log lockedBuffer
	cmd := exec.Command(driver, fmt.Sprintf("--port=%d", port))
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("chromedriver log:\n%s", tail(log.String(), 8<<10))
		}
	})
	root := fmt.Sprintf("http://127.0.0.1:%d", port)
	wd := &webDriver{base: root}
	deadline := time.Now().Add(60 * time.Second)
	for {
		var status struct {
			Ready bool `json:"ready"`
		}
		if err := wd.do("GET", "/status", nil, &status); err == nil && status.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("chromedriver did not become ready within 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	opts := map[string]any{"args": []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"}}
	if bin, err := exec.LookPath("chromium"); err == nil {
		opts["binary"] = bin
	}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	wd.call(t, "POST", "/session", map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome", "goog:chromeOptions": opts}}}, &sess)
	if sess.SessionID == "" {
		t.Fatal("WebDriver gave no session id")
	}
	wd.base = root + "/session/" + sess.SessionID
	t.Cleanup(func() { wd.do("DELETE", "", nil, nil) })
	return wd
}

// call is do, failing the test on error.
func (wd *webDriver) call(t *testing.T, method, path string, body, value any) {
	t.Helper()
	if err := wd.do(method, path, body, value); err != nil {
		t.Fatalf("WebDriver %s %s: %v", method, path, err)
	}
}

// do sends one WebDriver command and decodes the answer's "value".
func (wd *webDriver) do(method, path string, body, value any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, wd.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c := http.Client{Timeout: 90 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("status %d: %s", resp.StatusCode, raw)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", resp.StatusCode, truncate(string(env.Value), 2000))
	}
	if value != nil {
		return json.Unmarshal(env.Value, value)
	}
	return nil
}

// find returns the WebDriver ids of the elements matching css.
func (wd *webDriver) find(t *testing.T, css string) []string {
	t.Helper()
	var els []map[string]string
	wd.call(t, "POST", "/elements", map[string]any{"using": "css selector", "value": css}, &els)
	var ids []string
	for _, e := range els {
		for k, v := range e {
			if strings.HasPrefix(k, "element-") {
				ids = append(ids, v)
			}
		}
	}
	return ids
}
