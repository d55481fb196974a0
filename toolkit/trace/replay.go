package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
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
// What else always varies between runs is left out with Ignore (a
// harness's per-run nonce in the prompt: params.prompt.*.text), and paths
// under the recorded working directory match the same paths under the
// live one: the replay learns both from session/new (or load, resume) and
// rewrites the recorded directory to the live one in what it sends back.
//
// A Replay is not safe for concurrent use: one connection drives it.
type Replay struct {
	// Opening is what the agent sent before the bridge sent anything.
	Opening [][]byte
	steps   []step
	next    int
	ids     map[string]json.RawMessage // recorded request id → live id
	// Ignore lists dotted paths left out of the comparison; a path
	// component is a member name, an array index, or * for every member
	// or element (params.prompt.*.text).
	Ignore []string
	cwds   []cwdPair // recorded working directory → live, learnt
}

// cwdPair maps a recorded working directory to the live one.
type cwdPair struct{ rec, live string }

// newCwdPair returns the pair that maps paths under the recorded working
// directory rec to the live one, each without trailing slashes (an
// editor's "/home/u/proj/" has "/home/u/proj/a.go" under it, which the
// whole-prefix match of mapCwds would not see), and reports false when
// there is nothing to map: the two are the same, or either is the root
// or not an absolute path.
func newCwdPair(rec, live string) (cwdPair, bool) {
	rec, live = strings.TrimRight(rec, "/"), strings.TrimRight(live, "/")
	if !strings.HasPrefix(rec, "/") || !strings.HasPrefix(live, "/") {
		return cwdPair{}, false // (the root, or not an absolute path)
	}
	return cwdPair{rec: rec, live: live}, rec != live
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
	learnCwd(&rp.cwds, s.expect.Msg, live.Msg)
	if !matchesWith(s.expect, live, rp.Ignore, rp.cwds) {
		return nil, &Mismatch{Index: rp.next + 1, Expected: s.expect.Message(), Actual: frame}
	}
	rp.next++
	if s.expect.Kind == KindRequest && len(s.expect.ID) > 0 && len(live.ID) > 0 {
		rp.ids[string(s.expect.ID)] = live.ID
	}
	out := make([]Reply, 0, len(s.replies))
	for _, r := range s.replies {
		out = append(out, Reply{Frame: mapCwds(rp.rewrite(r.Frame), rp.cwds, false), After: r.After})
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

// matchesWith reports whether got is the frame want recorded, with the
// paths of ignore left out and the recorded working directories in want
// read as the live ones.
func matchesWith(want, got Record, ignore []string, cwds []cwdPair) bool {
	if sortOf(want.Kind) != sortOf(got.Kind) || want.Method != got.Method {
		return false
	}
	if want.Kind == KindFrame || len(want.Msg) == 0 || len(got.Msg) == 0 {
		return true
	}
	w, g := []byte(want.Msg), []byte(got.Msg)
	if len(cwds) > 0 {
		w = mapCwds(w, cwds, false)
	}
	if len(ignore) > 0 {
		w, g = withoutPaths(w, ignore), withoutPaths(g, ignore)
	}
	for _, p := range []string{"params", "result", "error"} {
		if !sameJSON(gjson.GetBytes(w, p), gjson.GetBytes(g, p)) {
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

// withoutPaths returns msg with the values at paths removed.
func withoutPaths(msg []byte, paths []string) []byte {
	var v any
	if json.Unmarshal(msg, &v) != nil {
		return msg
	}
	for _, p := range paths {
		deleteAt(v, strings.Split(p, "."))
	}
	out, err := json.Marshal(v)
	if err != nil {
		return msg
	}
	return out
}

// deleteAt removes the value at path from v: a member name, an array
// index, or * for all of them, per component.
func deleteAt(v any, path []string) {
	if len(path) == 0 {
		return
	}
	head, last := path[0], len(path) == 1
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if head != "*" && head != k {
				continue
			}
			if last {
				delete(x, k)
			} else {
				deleteAt(c, path[1:])
			}
		}
	case []any:
		for i, c := range x {
			if head != "*" && head != strconv.Itoa(i) {
				continue
			}
			if last {
				x[i] = nil // an element keeps its place: the others' indexes stay
			} else {
				deleteAt(c, path[1:])
			}
		}
	}
}

// learnCwd records the working directory a recorded frame and its live
// counterpart name (params.cwd of session/new, load, resume), so that
// paths under the recorded one can be read as paths under the live one.
func learnCwd(cwds *[]cwdPair, rec, live []byte) {
	rc, lc := gjson.GetBytes(rec, "params.cwd"), gjson.GetBytes(live, "params.cwd")
	if rc.Type != gjson.String || lc.Type != gjson.String {
		return
	}
	pair, ok := newCwdPair(rc.Str, lc.Str)
	if !ok {
		return
	}
	for _, c := range *cwds {
		if c.rec == pair.rec {
			return
		}
	}
	*cwds = append(*cwds, pair)
	// Longest first, so that a nested directory is mapped before its parent.
	slices.SortFunc(*cwds, func(a, b cwdPair) int { return len(b.rec) - len(a.rec) })
}

// isNameByte reports whether c may continue a file name.
func isNameByte(c byte) bool {
	return c == '.' || c == '-' || c == '_' || c == '~' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}

// mapCwds rewrites, in the JSON frame b, every string that is a recorded
// working directory or a path under one to the live directory (the
// reverse with back). Only whole path prefixes are rewritten: /tmp/a does
// not touch /tmp/ab.
func mapCwds(b []byte, cwds []cwdPair, back bool) []byte {
	for _, c := range cwds {
		from, to := c.rec, c.live
		if back {
			from, to = to, from
		}
		fq, _ := json.Marshal(from)
		tq, _ := json.Marshal(to)
		fq, tq = fq[1:len(fq)-1], tq[1:len(tq)-1] // inside a JSON string
		var out []byte
		last := 0 // b[:last] is in out already
		for at := 0; ; {
			i := bytes.Index(b[at:], fq)
			if i < 0 {
				break
			}
			i += at
			end := i + len(fq)
			// A whole path: nothing of a longer name before or after; a
			// slash before only as in file:///; and not right after the
			// directory just rewritten, whose path it continues
			// (/tmp/a/tmp/a is under /tmp/a once, not twice).
			before := i == 0 || !isNameByte(b[i-1]) && (b[i-1] != '/' || i >= 2 && b[i-2] == '/') && i != last
			if before && (end == len(b) || !isNameByte(b[end])) {
				out = append(append(out, b[last:i]...), tq...)
				last = end
			}
			at = end
		}
		rest := b[last:]
		if out != nil {
			b = append(out, rest...)
		}
	}
	return b
}

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

// SetIgnore sets every candidate's Ignore.
func (s *Set) SetIgnore(paths []string) {
	for _, c := range s.cands {
		c.Ignore = paths
	}
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
