package bridge_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/acp-bridge/acp-bridge/bridge"
	"github.com/acp-bridge/acp-bridge/bridge/store"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/acp-bridge/acp-bridge/translate/acp"
	"github.com/acp-bridge/acp-bridge/translate/acpv2"
	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

// lockedBuffer is a log sink safe for the engine's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A relayed v2 turn outlives its prompt's answer, so the idle timer keeps
// starting again while the turn runs. Once the turn ends, the session is
// idle a whole IdleTimeout from that end: the backend was closed as soon
// as the period the turn ended in ran out, anywhere from no time at all
// to IdleTimeout after the turn. In fake time (synctest): the turn runs
// 2.5 periods, then the test looks just before and just after one period.
func TestIdle_ARelayedV2TurnsEndStartsAWholePeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = time.Second
		st, err := store.Open(store.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		logs := &lockedBuffer{}
		h := newHarness(t, func(b *bridge.Bridge) {
			b.Sessions = &bridge.Durable{Store: st, IdleTimeout: idle}
			b.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info})
			v1, _ := acp.Dialect.Configure(nil)
			b.NewTranslator = func() translate.Translator { return acpv2.NewNegotiator(2, v1) }
		})
		defer h.close()
		lm := &longMessage{h: h, t: t, editor: 2, agent: 2}
		lm.open()
		closed := func() bool { return strings.Contains(logs.String(), "closing an idle backend session") }

		h.send(`{"jsonrpc":"2.0","id":7,"method":"session/prompt","params":{"sessionId":"` + lm.sid + `","prompt":[{"type":"text","text":"long"}]}}`)
		prompt := h.agentRecv()
		asid := gjson.Get(prompt, "params.sessionId").Str
		h.agentSend(`{"jsonrpc":"2.0","id":` + gjson.Get(prompt, "id").Raw + `,"result":{"messageId":"u-1"}}`)
		h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + asid + `","update":{"sessionUpdate":"state_update","state":"running"}}}`)
		time.Sleep(idle * 5 / 2)
		synctest.Wait()
		if closed() {
			t.Fatalf("the backend was closed as idle during its turn:\n%s", logs)
		}
		h.agentSend(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"` + asid + `","update":{"sessionUpdate":"state_update","state":"idle","stopReason":"end_turn"}}}`)
		time.Sleep(idle * 9 / 10)
		synctest.Wait()
		if closed() {
			t.Errorf("the backend was closed as idle less than %v after its turn ended; the idle timeout is %v:\n%s", idle*9/10, idle, logs)
		}
		time.Sleep(idle * 12 / 10)
		synctest.Wait()
		if !closed() {
			t.Errorf("the backend was not closed %v after its turn ended (idle timeout %v):\n%s", idle*21/10, idle, logs)
		}
	})
}
