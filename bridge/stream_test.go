package bridge_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/acpv2"
	"github.com/tidwall/gjson"
)

// A turn's updates, mixed with messages of the same turn that the engine
// acts on (an agent request, an update it must repair, the prompt's
// answer): the editor and the store get everything in the agent's order,
// the prompt's answer last, the session hook is told of every update, and
// a load replays all of it.
func TestStream_OrderWithTheLoopsMessages(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var told streamCount
	h := newHarness(t, func(b *bridge.Bridge) {
		b.Sessions = &bridge.Durable{Store: st}
		told.hook(b)
	})
	// The agent replays nothing itself: a load is the bridge's, from the store.
	h.initializePlain()
	sid := h.newSession("1")

	chunk := func(text string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`, sid, text)
	}
	var want []string // the texts, in the agent's order
	for turn := range 3 {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}}`, 10+turn, sid))
		prompt := h.agentRecv()
		var sent []string
		stream := func(prefix string, n int) {
			for i := range n {
				text := fmt.Sprintf("%s%d.%d ", prefix, turn, i)
				sent = append(sent, text)
				h.agentSend(chunk(text))
			}
		}
		stream("a", 300)
		// A request of the agent's: the loop's.
		h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","id":"p%d","method":"session/request_permission","params":{"sessionId":%q,"toolCall":{"toolCallId":"t1"},"options":[{"optionId":"ok","name":"OK","kind":"allow_once"}]}}`, turn, sid))
		sent = append(sent, "<permission>")
		// A pretty-printed update: put on one line, and counted as a
		// repair, by the loop.
		text := fmt.Sprintf("b%d ", turn)
		h.agentSend(strings.Replace(chunk(text), `"params":`, "\n  \"params\": ", 1))
		sent = append(sent, text)
		stream("c", 300)
		h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(prompt, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)

		for i, w := range sent {
			got := h.recv()
			if w == "<permission>" {
				if gjson.Get(got, "method").Str != "session/request_permission" {
					t.Fatalf("turn %d message %d = %s, want the permission request", turn, i, got)
				}
				h.send(`{"jsonrpc":"2.0","id":` + gjson.Get(got, "id").Raw + `,"result":{"outcome":{"outcome":"selected","optionId":"ok"}}}`)
				continue
			}
			if txt := gjson.Get(got, "params.update.content.text").Str; txt != w {
				t.Fatalf("turn %d message %d = %s, want the update %q", turn, i, got, w)
			}
			want = append(want, w)
		}
		if got := h.recv(); gjson.Get(got, "id").Int() != int64(10+turn) || gjson.Get(got, "result.stopReason").Str != "end_turn" {
			t.Fatalf("turn %d: after its updates = %s, want the prompt's answer", turn, got)
		}
		if got := h.agentRecv(); gjson.Get(got, "result.outcome.optionId").Str != "ok" {
			t.Fatalf("the agent got %s, want the permission answer", got)
		}
	}

	// A load right away replays every update written, in order.
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":20,"method":"session/load","params":{"sessionId":%q,"cwd":"/tmp","mcpServers":[]}}`, sid))
	var replayed strings.Builder
	for {
		got := h.recv()
		if gjson.Get(got, "id").Int() == 20 {
			if gjson.Get(got, "error").Exists() {
				t.Fatalf("load = %s", got)
			}
			break
		}
		if gjson.Get(got, "params.update.sessionUpdate").Str == "agent_message_chunk" {
			replayed.WriteString(gjson.Get(got, "params.update.content.text").Str)
		}
	}
	if got, w := replayed.String(), strings.Join(want, ""); got != w {
		t.Errorf("load replayed %d bytes of agent text, want %d:\n got %.200s…\nwant %.200s…", len(got), len(w), got, w)
	}
	h.close()
	if got := told.count(); got != len(want) {
		t.Errorf("OnSession was told of %d updates, want %d", got, len(want))
	}
}

// The session hook gets every update, one by one, with its body.
func TestStream_SessionHookGetsEveryUpdate(t *testing.T) {
	var mu sync.Mutex
	kinds := map[bridge.SessionEventKind]int{}
	h := newHarness(t, func(b *bridge.Bridge) {
		b.OnSession = func(ev bridge.SessionEvent) {
			mu.Lock()
			defer mu.Unlock()
			kinds[ev.Kind]++
		}
	})
	h.initialize()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"hi"}]}}`)
	req := h.agentRecv()
	const n = 500
	for i := range n {
		h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, sid, i))
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	for range n + 1 {
		h.recv()
	}
	h.close()
	mu.Lock()
	defer mu.Unlock()
	if kinds[bridge.SessionUpdate] != n {
		t.Errorf("OnSession got %d SessionUpdate events, want %d", kinds[bridge.SessionUpdate], n)
	}
}

// The binary's ACP links negotiate the agent's version (acpv2.Negotiator,
// around the relay or the shim). Once the agent has answered v1, a turn's
// updates reach the editor as they do behind the v1 translator alone.
func TestStream_BehindVersionNegotiation(t *testing.T) {
	var told streamCount
	h := newHarness(t, func(b *bridge.Bridge) {
		newTr, diags := acp.Dialect.Configure(nil) // the shim, as by default
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		b.NewTranslator = func() translate.Translator { return acpv2.NewNegotiator(0, newTr) }
		told.hook(b)
	})
	h.initialize() // answered with protocolVersion 1
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"hi"}]}}`)
	req := h.agentRecv()
	const n = 500
	for i := range n {
		h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, sid, i))
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	for i := range n {
		if got := gjson.Get(h.recv(), "params.update.content.text").Str; got != fmt.Sprint(i) {
			t.Fatalf("update %d reads %q", i, got)
		}
	}
	if got := h.recv(); gjson.Get(got, "result.stopReason").Str != "end_turn" {
		t.Fatalf("the prompt's answer = %s", got)
	}
	h.close()
	if got := told.count(); got != n {
		t.Errorf("OnSession was told of %d updates, want %d", got, n)
	}
}

// A turn that streamed more than a few MiB hands the garbage it left back
// to the OS when it ends (a collection and a release, in the background):
// the runtime would keep the pages for minutes. With the pacer off, only
// that release collects.
func TestStream_LongTurnGivesMemoryBack(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	h := newHarness(t, nil)
	h.initialize()
	sid := h.newSession("1")
	h.send(`{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"` + sid + `","prompt":[{"type":"text","text":"hi"}]}}`)
	req := h.agentRecv()
	text := strings.Repeat("x", 4<<10)
	const n = 2500 // 10 MiB of updates
	go func() {
		for range n {
			h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"%s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}}}}`, sid, text))
		}
	}()
	for range n {
		h.recv()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	if got := h.recv(); gjson.Get(got, "result.stopReason").Str != "end_turn" {
		t.Fatalf("prompt answer = %s", got)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.ReadMemStats(&ms)
		if ms.NumGC > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no collection ran after a 10 MiB turn ended: its memory stays with the process")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A session the store renamed (the agent handed out an id the store already
// has, so the editor got "dup~2" and the agent says "dup"): every update the editor gets names the editor's id, never
// the agent's, byte for byte the agent's otherwise, and the store records
// them under the editor's id for a load to replay.
func TestStream_RenamedSession(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Create("dup", store.Meta{SessionID: "dup", Cwd: "/elsewhere"}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, func(b *bridge.Bridge) {
		b.Sessions = &bridge.Durable{Store: st}
	})
	h.initializePlain()
	h.send(`{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/tmp","mcpServers":[]}}`)
	req := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"sessionId":"dup"}}`)
	sid := gjson.Get(h.recv(), "result.sessionId").Str
	if sid == "dup" || sid == "" {
		t.Fatalf("session/new gave the editor %q: want a new id, the store knows \"dup\"", sid)
	}

	const n = 2000
	forms := [2]string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q, "update":{"sessionUpdate":"agent_message_chunk","content":{"text":%q,"type":"text"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":%q}}}}`,
	}
	var want strings.Builder
	for turn := range 2 {
		h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}}`, 10+turn, sid))
		prompt := h.agentRecv()
		if got := gjson.Get(prompt, "params.sessionId").Str; got != "dup" {
			t.Fatalf("the agent got the prompt for %q, want its own id \"dup\"", got)
		}
		for i := range n {
			text := fmt.Sprintf("%d.%d ", turn, i)
			// Spacing and key order of the agent's own: kept (the
			// first turn); the compact form of the SDKs (the second).
			h.agentSend(fmt.Sprintf(forms[turn], "dup", text))
			want.WriteString(text)
		}
		h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(prompt, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
		for i := range n {
			got := h.recv()
			wantLine := fmt.Sprintf(forms[turn], sid, fmt.Sprintf("%d.%d ", turn, i))
			if got != wantLine {
				t.Fatalf("turn %d update %d = %s\nwant %s", turn, i, got, wantLine)
			}
		}
		if got := h.recv(); gjson.Get(got, "id").Int() != int64(10+turn) {
			t.Fatalf("turn %d: after its updates = %s, want the prompt's answer", turn, got)
		}
	}
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":20,"method":"session/load","params":{"sessionId":%q,"cwd":"/tmp","mcpServers":[]}}`, sid))
	var replayed strings.Builder
	for {
		got := h.recv()
		if gjson.Get(got, "id").Int() == 20 {
			if gjson.Get(got, "error").Exists() {
				t.Fatalf("load = %s", got)
			}
			break
		}
		if s := gjson.Get(got, "params.sessionId").Str; s != sid {
			t.Fatalf("load replayed %s: it names %q, not the session %q", got, s, sid)
		}
		if gjson.Get(got, "params.update.sessionUpdate").Str == "agent_message_chunk" {
			replayed.WriteString(gjson.Get(got, "params.update.content.text").Str)
		}
	}
	if replayed.String() != want.String() {
		t.Errorf("load replayed %d bytes of agent text, want %d", replayed.Len(), want.Len())
	}
	// The store's other "dup", whose id the agent reused, got none of it.
	done := make(chan struct{})
	st.Written(func() { close(done) })
	<-done
	loaded := make(chan *store.Transcript, 1)
	st.Load("dup", func(tr *store.Transcript, err error) {
		if err != nil {
			t.Errorf("load dup: %v", err)
		}
		loaded <- tr
	})
	if tr := <-loaded; tr != nil && len(tr.Records) != 0 {
		t.Errorf("the store's session \"dup\" has %d records: the renamed session's updates were written to the session whose id the agent reused", len(tr.Records))
	}
}

// Whatever the burst, when the agent then pauses mid-turn (nothing else to
// send, no answer to write) every update it sent reaches the editor: none
// waits for a wake-up that only the next frame would bring.
func TestStream_UpdatesGoOutWhenTheAgentPauses(t *testing.T) {
	h := newHarness(t, nil)
	h.initializePlain()
	sid := h.newSession("1")
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}}`, sid))
	prompt := h.agentRecv()
	n := 0
	for _, burst := range []int{1, 1, 7, 300, 1, 2000, 3} {
		for range burst {
			h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, sid, n))
			n++
		}
		for i := n - burst; i < n; i++ {
			got := h.recv() // times out if an update waits for a wake-up that never comes
			if text := gjson.Get(got, "params.update.content.text").Str; text != fmt.Sprint(i) {
				t.Fatalf("update %d = %s", i, got)
			}
		}
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(prompt, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	if got := h.recv(); gjson.Get(got, "id").Int() != 10 {
		t.Fatalf("after the updates = %s, want the prompt's answer", got)
	}
}

// When the agent pauses mid-turn, with nothing for the loop to do, every
// update it sent is in the store already: a crash then loses none that the
// editor was shown.
func TestStream_RecordsReachTheStoreWhenTheAgentPauses(t *testing.T) {
	st, err := store.Open(store.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := newHarness(t, func(b *bridge.Bridge) {
		b.Sessions = &bridge.Durable{Store: st}
	})
	h.initializePlain()
	sid := h.newSession("1")
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}}`, sid))
	prompt := h.agentRecv()
	const n = 50
	for i := range n {
		h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"u%d"}}}}`, sid, i))
	}
	for range n {
		h.recv()
	}
	// The agent pauses: nothing more comes, the loop has nothing to do.
	texts := func() (got []string) {
		done := make(chan struct{})
		st.Written(func() { close(done) })
		<-done
		loaded := make(chan *store.Transcript, 1)
		st.Load(sid, func(tr *store.Transcript, err error) {
			if err != nil {
				t.Errorf("load %s: %v", sid, err)
			}
			loaded <- tr
		})
		if tr := <-loaded; tr != nil {
			for _, r := range tr.Records {
				if text := gjson.GetBytes(r.Body, "update.content.text"); text.Exists() {
					got = append(got, text.Str)
				}
			}
		}
		return got
	}
	// The store joins a run of text chunks into one record: what it holds
	// is their text, in order.
	var want strings.Builder
	for i := range n {
		fmt.Fprintf(&want, "u%d", i)
	}
	var got string
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if got = strings.Join(texts(), ""); got == want.String() || time.Now().After(deadline) {
			break
		}
	}
	if got != want.String() {
		t.Fatalf("while the agent pauses, the store holds the text %q of the %d updates the editor was shown; want %q", got, n, want.String())
	}
	if records := len(texts()); records > n/10 {
		t.Errorf("the store keeps %d records of a run of %d plain text chunks; want them joined into a few (store.Lines.TextChunk)", records, n)
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(prompt, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	if got := h.recv(); gjson.Get(got, "id").Int() != 10 {
		t.Fatalf("after the updates = %s, want the prompt's answer", got)
	}
}

// A link that reads ahead of the engine (a child's frames come from a
// reader goroutine) never waits between the frames of a long burst: its
// first updates reach the editor while the burst goes on, not when the
// queue's bound is reached.
func TestStream_ALinkThatNeverWaitsStillStreams(t *testing.T) {
	h := newHarness(t, nil)
	h.initializePlain()
	sid := h.newSession("1")
	h.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":10,"method":"session/prompt","params":{"sessionId":%q,"prompt":[{"type":"text","text":"go"}]}}`, sid))
	prompt := h.agentRecv()
	const n, first = 3000, 2000 // 3000 updates: about 500 KB
	for i := range n {
		h.agentSend(fmt.Sprintf(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":%q,"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%d"}}}}`, sid, i))
	}
	for i := range first {
		got := h.recv() // times out if the writer waits for the burst to end
		if text := gjson.Get(got, "params.update.content.text").Str; text != fmt.Sprint(i) {
			t.Fatalf("update %d = %s", i, got)
		}
	}
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(prompt, "id").Raw + `,"result":{"stopReason":"end_turn"}}`)
	for i := first; i < n; i++ {
		if text := gjson.Get(h.recv(), "params.update.content.text").Str; text != fmt.Sprint(i) {
			t.Fatalf("update %d = %s", i, text)
		}
	}
	if got := h.recv(); gjson.Get(got, "id").Int() != 10 {
		t.Fatalf("after the updates = %s, want the prompt's answer", got)
	}
}

// streamCount counts the updates the session hook is told of.
type streamCount struct {
	mu sync.Mutex
	n  int
}

// hook sets b's session hook to count.
func (c *streamCount) hook(b *bridge.Bridge) {
	b.OnSession = func(ev bridge.SessionEvent) {
		if ev.Kind == bridge.SessionUpdate {
			c.mu.Lock()
			c.n++
			c.mu.Unlock()
		}
	}
}

func (c *streamCount) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// initializePlain initializes with an agent that offers nothing (unlike
// initialize's, no loadSession: a load is then the bridge's own, from the
// store).
func (h *harness) initializePlain() {
	h.t.Helper()
	h.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}`)
	req := h.agentRecv()
	h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(req, "id").Raw + `,"result":{"protocolVersion":1,"agentCapabilities":{}}}`)
	h.recv()
}
