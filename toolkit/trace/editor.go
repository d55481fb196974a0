package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// An EditorReplay plays the bridge's side of one recorded agent link
// against a live agent: it says what to send next and compares what the
// agent sends with the recording. Ids of the agent's own requests and
// session ids may differ from the recorded ones: they are learnt from the
// agent's frames and used in the frames sent after.
type EditorReplay struct {
	recs     []Record
	pos      int
	agentIDs map[string]json.RawMessage // recorded id of an agent request → live id
	sessions map[string]string          // recorded session id → live
	// Ignore lists dotted paths (result._meta.pid) left out of the
	// comparison: values that differ between two runs of the same agent;
	// a component may be an array index or * (see Replay.Ignore).
	Ignore []string
	// Cwd, when set, replaces the recorded working directory (the first
	// params.cwd the recording sends) in every frame sent, and in the
	// recorded frames compared: the recording's temporary directory is
	// usually gone.
	Cwd  string
	cwds []cwdPair
}

// NewEditorReplay returns the editor side of link in recs.
func NewEditorReplay(recs []Record, link int) *EditorReplay {
	e := &EditorReplay{agentIDs: map[string]json.RawMessage{}, sessions: map[string]string{}}
	for _, r := range recs {
		if r.Hop == "agent" && r.Link == link && r.Kind != KindNote {
			e.recs = append(e.recs, r)
		}
	}
	return e
}

// Next returns the next step: a frame to send (send true), or the
// recorded frame the agent should send next (send false); done when the
// recording is over.
func (e *EditorReplay) Next() (frame []byte, send, done bool) {
	if e.pos >= len(e.recs) {
		return nil, false, true
	}
	r := e.recs[e.pos]
	e.pos++
	if r.Dir == "in" {
		return mapCwds(r.Message(), e.cwds, false), false, false
	}
	if e.Cwd != "" && len(e.cwds) == 0 {
		if c := gjson.GetBytes(r.Msg, "params.cwd"); c.Type == gjson.String {
			if pair, ok := newCwdPair(c.Str, e.Cwd); ok {
				e.cwds = []cwdPair{pair}
			}
		}
	}
	return mapCwds(e.rewrite(r), e.cwds, false), true, false
}

// NextIn returns the next step when it is a recorded frame of the
// agent's, advancing past it; ok is false (and nothing advances) when the
// next step is a frame to send or the recording is over.
func (e *EditorReplay) NextIn() (frame []byte, ok bool) {
	if e.pos >= len(e.recs) || e.recs[e.pos].Dir != "in" {
		return nil, false
	}
	frame, _, _ = e.Next()
	return frame, true
}

// Gap is the recorded time between the last step Next returned and the
// one before it.
func (e *EditorReplay) Gap() time.Duration {
	if e.pos < 2 {
		return 0
	}
	return time.Duration(max(0, e.recs[e.pos-1].TNs-e.recs[e.pos-2].TNs))
}

// Position is the index (from 1) of the last step Next returned.
func (e *EditorReplay) Position() int { return e.pos }

func (e *EditorReplay) rewrite(r Record) []byte {
	out := r.Message()
	if r.Kind == KindResponse || r.Kind == KindError {
		id := gjson.GetBytes(out, "id")
		if live, ok := e.agentIDs[id.Raw]; ok && id.Index > 0 {
			out = append(append(append([]byte{}, out[:id.Index]...), live...), out[id.Index+len(id.Raw):]...)
		}
	}
	for rec, live := range e.sessions {
		if rec != live {
			q, _ := json.Marshal(rec)
			lq, _ := json.Marshal(live)
			out = bytes.ReplaceAll(out, q, lq)
		}
	}
	return out
}

// Compare checks the agent's live frame against the recorded one, learning
// session and request ids, and returns the differences found (none when
// they agree).
func (e *EditorReplay) Compare(recorded, live []byte) []string {
	var want, got any
	if json.Unmarshal(recorded, &want) != nil || json.Unmarshal(live, &got) != nil {
		if bytes.Equal(recorded, live) {
			return nil
		}
		return []string{"frame differs"}
	}
	wm, _ := want.(map[string]any)
	gm, _ := got.(map[string]any)
	if wm != nil && gm != nil {
		if _, isReq := wm["method"]; isReq {
			if wid, ok := wm["id"]; ok {
				if gid, ok := gm["id"]; ok {
					wb, _ := json.Marshal(wid)
					gb, _ := json.Marshal(gid)
					e.agentIDs[string(wb)] = gb
					delete(wm, "id")
					delete(gm, "id")
				}
			}
		}
		for _, p := range e.Ignore {
			deleteAt(wm, strings.Split(p, "."))
			deleteAt(gm, strings.Split(p, "."))
		}
	}
	var diffs []string
	e.diff("", want, got, &diffs)
	return diffs
}

// diff walks want and got side by side, learning session ids.
func (e *EditorReplay) diff(path string, want, got any, out *[]string) {
	if len(*out) >= 20 {
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: expected an object, got %s", orRoot(path), short(got)))
			return
		}
		for k, wv := range w {
			gv, ok := g[k]
			switch {
			case !ok:
				*out = append(*out, fmt.Sprintf("%s: missing (expected %s)", join(path, k), short(wv)))
			case k == "sessionId":
				ws, _ := wv.(string)
				gs, _ := gv.(string)
				if live, known := e.sessions[ws]; !known {
					e.sessions[ws] = gs
				} else if live != gs {
					*out = append(*out, fmt.Sprintf("%s: expected session %q (recorded %q), got %q", join(path, k), live, ws, gs))
				}
			default:
				e.diff(join(path, k), wv, gv, out)
			}
		}
		for k, gv := range g {
			if _, ok := w[k]; !ok {
				*out = append(*out, fmt.Sprintf("%s: unexpected %s", join(path, k), short(gv)))
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			*out = append(*out, fmt.Sprintf("%s: expected %s, got %s", orRoot(path), short(want), short(got)))
			return
		}
		for i := range w {
			e.diff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i], out)
		}
	default:
		if !reflect.DeepEqual(want, got) {
			*out = append(*out, fmt.Sprintf("%s: expected %s, got %s", orRoot(path), short(want), short(got)))
		}
	}
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func orRoot(path string) string {
	if path == "" {
		return "(frame)"
	}
	return path
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
