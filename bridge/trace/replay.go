package trace

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/tidwall/gjson"
)

// A Replay plays the agent side of one recorded agent link: every frame
// the bridge sends it is matched against the next frame the bridge sent in
// the recording, and answered with the frames the agent sent after that
// one, up to the bridge's next recorded frame.
//
// A frame matches when it is of the same sort (request, notification,
// response; a legacy frame by its "type") with the same method and, for
// JSON-RPC, the same params (or result or error), compared as JSON, except
// for what differs between two runs of the same session on their own:
// the working directory (params.cwd), the editor's clientInfo (or v2's
// info) and the version an initialize asks for (protocolVersion). The
// recorded answers carry the live request ids; ids of the agent's own
// requests are kept, so the bridge answers them with the recorded ids.
//
// A Replay is not safe for concurrent use: one connection drives it.
type Replay struct {
	// Opening is what the agent sent before the bridge sent anything.
	Opening [][]byte
	steps   []step
	next    int
	ids     map[string]json.RawMessage // recorded request id → live id
}

type step struct {
	expect  Record
	replies []Reply
}

// Reply is a recorded frame of the agent's, to be sent After the arrival of
// the bridge's frame it followed, as long after as in the recording (a
// late answer after a cancel is late again).
type Reply struct {
	Frame []byte
	After time.Duration
}

// Links lists the agent links of recs in order of first appearance.
func Links(recs []Record) []int {
	var out []int
	for _, r := range recs {
		if r.Hop == "agent" && !slices.Contains(out, r.Link) {
			out = append(out, r.Link)
		}
	}
	return out
}

// NewReplay returns the replay of link's agent hop in recs.
func NewReplay(recs []Record, link int) *Replay {
	rp := &Replay{ids: map[string]json.RawMessage{}}
	for _, r := range recs {
		if r.Hop != "agent" || r.Link != link || r.Kind == KindNote {
			continue
		}
		switch {
		case r.Dir == "out":
			rp.steps = append(rp.steps, step{expect: r})
		case len(rp.steps) == 0:
			rp.Opening = append(rp.Opening, r.Message())
		default:
			s := &rp.steps[len(rp.steps)-1]
			s.replies = append(s.replies, Reply{Frame: r.Message(), After: time.Duration(max(0, r.TNs-s.expect.TNs))})
		}
	}
	return rp
}

// Remaining is the number of recorded frames from the bridge not yet seen.
func (rp *Replay) Remaining() int { return len(rp.steps) - rp.next }

// Mismatch says how a live frame differs from the recording.
type Mismatch struct {
	// Index counts the recorded bridge frames, from 1.
	Index    int
	Expected []byte // nil when the recording has ended
	Actual   []byte
}

func (m *Mismatch) Error() string {
	if m.Expected == nil {
		return fmt.Sprintf("frame %d: the recording has no more frames from the bridge; got %s", m.Index, m.Actual)
	}
	return fmt.Sprintf("frame %d differs from the recording:\n  expected %s\n  actual   %s", m.Index, m.Expected, m.Actual)
}

// Handle takes one frame from the bridge and returns the frames to send
// back, or a *Mismatch (the recording is then not advanced, so a later
// frame may still match).
func (rp *Replay) Handle(frame []byte) ([]Reply, error) {
	if rp.next >= len(rp.steps) {
		return nil, &Mismatch{Index: rp.next + 1, Actual: frame}
	}
	s := rp.steps[rp.next]
	var live Record
	Classify(&live, frame)
	if !matches(s.expect, live) {
		return nil, &Mismatch{Index: rp.next + 1, Expected: s.expect.Message(), Actual: frame}
	}
	rp.next++
	if s.expect.Kind == KindRequest && len(s.expect.ID) > 0 && len(live.ID) > 0 {
		rp.ids[string(s.expect.ID)] = live.ID
	}
	out := make([]Reply, 0, len(s.replies))
	for _, r := range s.replies {
		out = append(out, Reply{Frame: rp.rewrite(r.Frame), After: r.After})
	}
	return out, nil
}

// rewrite gives a recorded answer to a bridge request the live id.
func (rp *Replay) rewrite(frame []byte) []byte {
	if gjson.GetBytes(frame, "method").Exists() {
		return frame // the agent's own request or notification
	}
	id := gjson.GetBytes(frame, "id")
	live, ok := rp.ids[id.Raw]
	if !id.Exists() || !ok || id.Index <= 0 {
		return frame
	}
	out := make([]byte, 0, len(frame)+len(live))
	out = append(out, frame[:id.Index]...)
	out = append(out, live...)
	return append(out, frame[id.Index+len(id.Raw):]...)
}

func sortOf(kind string) string {
	if kind == KindError {
		return KindResponse
	}
	return kind
}

func matches(want, got Record) bool {
	if sortOf(want.Kind) != sortOf(got.Kind) || want.Method != got.Method {
		return false
	}
	if want.Kind == KindFrame || len(want.Msg) == 0 || len(got.Msg) == 0 {
		return true
	}
	for _, p := range []string{"params", "result", "error"} {
		if !sameJSON(gjson.GetBytes(want.Msg, p), gjson.GetBytes(got.Msg, p)) {
			return false
		}
	}
	return true
}

// volatile are the params that differ between two runs of one session: the
// working directory, the editor's clientInfo (v2's info), and the ACP
// version an initialize asks for (a bridge that negotiates asks for 2
// where a trace recorded before asked for 1; the recorded answer then
// says which version the agent spoke).
var volatile = []string{"cwd", "clientInfo", "info", "protocolVersion"}

func sameJSON(a, b gjson.Result) bool {
	if a.Exists() != b.Exists() {
		return false
	}
	var va, vb any
	if json.Unmarshal([]byte(a.Raw), &va) != nil || json.Unmarshal([]byte(b.Raw), &vb) != nil {
		return a.Raw == b.Raw
	}
	for _, v := range []any{va, vb} {
		if m, ok := v.(map[string]any); ok {
			for _, k := range volatile {
				delete(m, k)
			}
		}
	}
	return reflect.DeepEqual(va, vb)
}

// A Set replays whichever recorded link the live frames turn out to be: the
// bridge opens a link per session with some dialects (and a probe link at
// initialize), and each link's agent process knows only its own frames.
// Every link is a candidate until a frame it does not expect rules it out;
// replies come from the first candidate still standing (links that
// share a beginning share its replies).
type Set struct {
	cands []*Replay
}

// NewSet returns a Set over links of recs (all links when links is
// empty).
func NewSet(recs []Record, links ...int) *Set {
	if len(links) == 0 {
		links = Links(recs)
	}
	s := &Set{}
	for _, l := range links {
		s.cands = append(s.cands, NewReplay(recs, l))
	}
	return s
}

// Opening is what the first candidate's agent sent before the bridge spoke.
func (s *Set) Opening() [][]byte {
	if len(s.cands) == 0 {
		return nil
	}
	return s.cands[0].Opening
}

// Remaining is Replay.Remaining of the first candidate.
func (s *Set) Remaining() int {
	if len(s.cands) == 0 {
		return 0
	}
	return s.cands[0].Remaining()
}

// Handle is Replay.Handle over the candidates. When none matches, the
// Mismatch is the one of the candidate that got furthest.
func (s *Set) Handle(frame []byte) ([]Reply, error) {
	var alive []*Replay
	var out []Reply
	var worst *Mismatch
	for _, c := range s.cands {
		r, err := c.Handle(frame)
		if err != nil {
			if m, ok := err.(*Mismatch); ok && (worst == nil || m.Index > worst.Index) {
				worst = m
			}
			continue
		}
		if alive == nil {
			out = r
		}
		alive = append(alive, c)
	}
	if alive == nil {
		if worst == nil {
			worst = &Mismatch{Index: 1, Actual: frame}
		}
		return nil, worst
	}
	s.cands = alive
	return out, nil
}
