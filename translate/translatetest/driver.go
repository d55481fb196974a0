package translatetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/tidwall/gjson"

	"github.com/acp-bridge/acp-bridge/translate"
)

// Output markers: where a rendered output went.
const (
	ToEditor = ">editor" // rendered JSON-RPC message for the editor
	ToAgent  = ">agent"  // frame for the agent, as returned
	GotError = ">error"  // the error a FromEditor/FromAgent call returned
	GotNote  = ">note"   // a Note output: the repair name and its detail
	GotTimer = ">timer"  // a Timer output: its delay
)

// Epoch is the time of the first input of every transcript: Msg.At is Epoch
// until a "tick" event moves it, so golden files never depend on the clock.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Output is one rendered output of a translator call.
type Output struct {
	Marker string // ToEditor, ToAgent, GotError, GotNote or GotTimer
	Text   string // one line: the message, the frame or the error text
}

// request is the driver's record of one editor request.
type request struct {
	rawID     json.RawMessage
	method    string
	answered  bool
	abandoned bool
}

// A Driver feeds one translator the way the engine does and checks the
// engine-visible invariants on everything it returns. It is what Run uses for
// each golden file and what FuzzAgent uses for each fuzz input; dialect tests
// may use it directly.
//
// Editor requests get Refs 1, 2, 3… in order. The raw editor id of each is
// kept so answers render exactly as the engine would write them. session/new
// requests carry Msg.Session "sess-1", "sess-2"… when the dialect is
// PerSession (the engine mints session ids for those dialects; for the others
// Msg.Session stays empty).
//
// Every input the driver passes to the translator (frame bytes, Msg.Body,
// Msg.Error) is a fresh copy that is overwritten as soon as the call returns,
// before the outputs are rendered: a translator that keeps or returns borrowed
// bytes instead of copying them produces garbage that the checks report.
//
// A Driver is not safe for concurrent use.
type Driver struct {
	tr         translate.Translator
	perSession bool
	// CancelGrace is the engine's cancel grace the driver gives session/cancel
	// and CancelRequest inputs (translate.Msg.Grace), as the engine does;
	// NewDriver sets the engine's default, 5 s.
	CancelGrace time.Duration

	now      time.Time // Msg.At of the next input
	nextRef  translate.Ref
	sessions int
	requests map[translate.Ref]*request
	byRawID  map[string]translate.Ref // canonical raw editor id → latest Ref
	calls    map[translate.Ref]string // translator's outstanding Calls → method

	// where prefixes problems, e.g. "x.txtar:12".
	where    string
	problems []string
}

// NewDriver configures d with options (HCL source; nil means no options block,
// which Configure receives as a nil body) and returns a driver around one new
// translator. filename names the options in diagnostics.
func NewDriver(d translate.Dialect, options []byte, filename string) (*Driver, error) {
	if d.Configure == nil {
		return nil, fmt.Errorf("dialect %q has no Configure", d.Name)
	}
	var body hcl.Body
	if options != nil {
		f, diags := hclparse.NewParser().ParseHCL(options, filename)
		if diags.HasErrors() {
			return nil, diags
		}
		body = f.Body
	}
	newTranslator, diags := d.Configure(body)
	if diags.HasErrors() {
		return nil, diags
	}
	if newTranslator == nil {
		return nil, fmt.Errorf("dialect %q: Configure returned no constructor", d.Name)
	}
	tr := newTranslator()
	if tr == nil {
		return nil, fmt.Errorf("dialect %q: constructor returned a nil Translator", d.Name)
	}
	return &Driver{
		tr:          tr,
		now:         Epoch,
		perSession:  d.PerSession,
		CancelGrace: 5 * time.Second,
		requests:    make(map[translate.Ref]*request),
		byRawID:     make(map[string]translate.Ref),
		calls:       make(map[translate.Ref]string),
	}, nil
}

// Translator returns the translator under test.
func (dr *Driver) Translator() translate.Translator { return dr.tr }

// SetWhere sets the prefix of problems reported from now on (a file:line).
func (dr *Driver) SetWhere(where string) { dr.where = where }

// Problems returns the invariant violations seen so far.
func (dr *Driver) Problems() []string { return dr.problems }

func (dr *Driver) problemf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if dr.where != "" {
		msg = dr.where + ": " + msg
	}
	dr.problems = append(dr.problems, msg)
}

// Feed handles one transcript input line: "editor> <message>",
// "agent> <frame>" or "event> abandon|cancel-request <editor id>". The error
// reports a line the driver cannot feed (a bug in the transcript, not in the
// translator); a translator's own error comes back as a GotError output.
func (dr *Driver) Feed(line string) ([]Output, error) {
	marker, payload, _ := strings.Cut(line, " ")
	switch marker {
	case "editor>":
		return dr.Editor([]byte(payload))
	case "agent>":
		return dr.Agent([]byte(payload)), nil
	case "event>":
		return dr.Event(payload)
	}
	return nil, fmt.Errorf("not an input line: %q", line)
}

// Editor feeds one message the editor sent, classified the way the engine
// classifies it: a request gets the next Ref; a response is the answer to the
// translator's Call whose Ref is the response id; a $/cancel_request naming a
// pending request becomes a CancelRequest input (other $/cancel_requests are
// dropped, as the engine drops them); any other notification is fed as is.
func (dr *Driver) Editor(message []byte) ([]Output, error) {
	env, perr := translate.ParseEnvelope(message)
	if perr != nil {
		return nil, fmt.Errorf("editor message: %v", perr)
	}
	var m translate.Msg
	switch {
	case env.IsRequest():
		dr.nextRef++
		ref := dr.nextRef
		dr.requests[ref] = &request{rawID: clone(env.ID), method: env.Method}
		dr.byRawID[canonical(env.ID)] = ref
		m = translate.Msg{Kind: translate.Request, Ref: ref, Method: env.Method, Body: clone(env.Params)}
		if env.Method == "session/new" && dr.perSession {
			dr.sessions++
			m.Session = fmt.Sprintf("sess-%d", dr.sessions)
		}
	case env.IsNotification() && env.Method == "$/cancel_request":
		ref, ok := dr.byRawID[canonical([]byte(gjson.GetBytes(env.Params, "requestId").Raw))]
		if !ok || dr.requests[ref].answered || dr.requests[ref].abandoned {
			return nil, nil
		}
		m = translate.Msg{Kind: translate.CancelRequest, Ref: ref, Grace: dr.CancelGrace}
	case env.IsNotification():
		m = translate.Msg{Kind: translate.Notification, Method: env.Method, Body: clone(env.Params)}
		if env.Method == "session/cancel" {
			m.Grace = dr.CancelGrace
		}
	default:
		n, err := strconv.ParseUint(string(env.ID), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("editor response id %s is not a Ref (calls render with the translator's Ref as id)", env.ID)
		}
		ref := translate.Ref(n)
		if _, ok := dr.calls[ref]; !ok {
			return nil, fmt.Errorf("editor response answers call %d, which is not outstanding (the engine would drop it)", n)
		}
		delete(dr.calls, ref)
		m = translate.Msg{Kind: translate.Response, Ref: ref, Body: clone(env.Result), Error: clone(env.Error)}
	}
	m.At = dr.now
	outs, err := dr.tr.FromEditor(m)
	lines := dr.render(outs, err)
	if err != nil && m.Kind == translate.Request {
		// The engine answers the request with -32603 itself.
		dr.requests[m.Ref].answered = true
	}
	return lines, nil
}

// Agent feeds one frame read from the agent.
func (dr *Driver) Agent(frame []byte) []Output {
	buf := clone(frame)
	if buf == nil {
		buf = []byte{}
	}
	// The frame is the translator's to keep (translate.Translator): a relay
	// returns slices of it instead of copies.
	if c, ok := dr.tr.(translate.AgentClock); ok {
		outs, err := c.FromAgentAt(buf, dr.now)
		return dr.render(outs, err)
	}
	outs, err := dr.tr.FromAgent(buf)
	return dr.render(outs, err)
}

// Event feeds an input the engine decides on its own: "abandon <editor id>"
// (the engine answered that request itself), "cancel-request <editor id>",
// "link-up", "link-down <reason>" or "tick <duration since the transcript
// began>" (translators get time only as data: Msg.At). The id is the raw
// JSON id the editor used.
func (dr *Driver) Event(event string) ([]Output, error) {
	name, id, _ := strings.Cut(event, " ")
	switch name {
	case "link-up":
		outs, err := dr.tr.FromEditor(translate.Msg{Kind: translate.LinkUp, At: dr.now})
		return dr.render(outs, err), nil
	case "link-down":
		// The engine answers every request routed to a lost link itself.
		for _, r := range dr.requests {
			if !r.answered {
				r.abandoned = true
			}
		}
		errObj := translate.Errorf(translate.CodeInternalError, "%s", strings.TrimSpace(id)).JSON()
		outs, err := dr.tr.FromEditor(translate.Msg{Kind: translate.LinkDown, Error: errObj, At: dr.now})
		return dr.render(outs, err), nil
	case "tick":
		d, err := time.ParseDuration(strings.TrimSpace(id))
		if err != nil {
			return nil, fmt.Errorf("event %q: %v", event, err)
		}
		dr.now = Epoch.Add(d)
		outs, terr := dr.tr.FromEditor(translate.Msg{Kind: translate.Tick, At: dr.now})
		return dr.render(outs, terr), nil
	}
	ref, ok := dr.byRawID[canonical([]byte(strings.TrimSpace(id)))]
	if !ok {
		return nil, fmt.Errorf("event %q: no editor request has id %s", event, id)
	}
	r := dr.requests[ref]
	var m translate.Msg
	switch name {
	case "abandon":
		if r.answered || r.abandoned {
			return nil, fmt.Errorf("event %q: request %s is no longer pending", event, id)
		}
		r.abandoned = true
		m = translate.Msg{Kind: translate.Abandon, Ref: ref}
	case "cancel-request":
		if r.answered || r.abandoned {
			return nil, fmt.Errorf("event %q: request %s is no longer pending (the engine would drop the cancel)", event, id)
		}
		m = translate.Msg{Kind: translate.CancelRequest, Ref: ref, Grace: dr.CancelGrace}
	default:
		return nil, fmt.Errorf("unknown event %q (want abandon or cancel-request)", name)
	}
	m.At = dr.now
	outs, err := dr.tr.FromEditor(m)
	return dr.render(outs, err), nil
}

// Finish checks the end-of-transcript invariant: every editor request was
// answered or abandoned, except those whose raw ids are listed in pending,
// which must still be open.
func (dr *Driver) Finish(pending []string) {
	want := make(map[string]bool)
	for _, id := range pending {
		want[canonical([]byte(id))] = true
	}
	refs := make([]translate.Ref, 0, len(dr.requests))
	for ref := range dr.requests {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		r := dr.requests[ref]
		open := !r.answered && !r.abandoned
		key := canonical(r.rawID)
		switch {
		case open && !want[key]:
			dr.problemf("editor request %s (%s) was never answered (list it in a `pending:` header line if that is intended)", r.rawID, r.method)
		case !open && want[key] && dr.byRawID[key] == ref:
			dr.problemf("editor request %s (%s) is listed as pending but was answered or abandoned", r.rawID, r.method)
		}
	}
	for key := range want {
		if _, ok := dr.byRawID[key]; !ok {
			dr.problemf("pending: no editor request has id %s", key)
		}
	}
}

// render turns outputs into lines and checks each against the invariants.
func (dr *Driver) render(outs []translate.Out, err error) []Output {
	var lines []Output
	for i, o := range outs {
		var text []byte
		marker := ToEditor
		switch o.Kind {
		case translate.Reply, translate.Fail:
			r, ok := dr.requests[o.Ref]
			id := translate.IntID(uint64(o.Ref))
			switch {
			case !ok:
				dr.problemf("output %d answers Ref %d, which the editor never sent", i, o.Ref)
			case r.abandoned:
				dr.problemf("output %d answers request %s (%s) after it was abandoned", i, r.rawID, r.method)
			case r.answered:
				dr.problemf("output %d answers request %s (%s) a second time", i, r.rawID, r.method)
			}
			if ok {
				id = r.rawID
				r.answered = true
			}
			if o.Kind == translate.Reply {
				text = translate.ResultFrame(id, o.Body)
			} else {
				text = translate.ErrorFrame(id, o.Body)
				dr.checkErrorObject(i, o.Body)
			}
		case translate.Notify:
			if o.Method == "" {
				dr.problemf("output %d: Notify without a method", i)
			}
			text = translate.NotificationFrame(o.Method, o.Body)
			if o.Method == "session/update" {
				dr.checkSessionUpdate(i, o.Body)
			}
		case translate.Call:
			if o.Method == "" {
				dr.problemf("output %d: Call without a method", i)
			}
			if m, ok := dr.calls[o.Ref]; ok {
				dr.problemf("output %d: Call Ref %d reused while call %q with that Ref is outstanding", i, o.Ref, m)
			}
			dr.calls[o.Ref] = o.Method
			text = translate.RequestFrame(translate.IntID(uint64(o.Ref)), o.Method, o.Body)
		case translate.CancelCall:
			if _, ok := dr.calls[o.Ref]; !ok {
				dr.problemf("output %d: CancelCall for Ref %d, which is not an outstanding Call", i, o.Ref)
			}
			text = translate.NotificationFrame("$/cancel_request", fmt.Appendf(nil, `{"requestId":%d}`, o.Ref))
		case translate.Frame:
			marker = ToAgent
			text = o.Body
		case translate.Forward:
			if o.Method == "" {
				dr.problemf("output %d: Forward without a method", i)
			}
			text = o.Body
			if o.Method == "session/update" {
				dr.checkSessionUpdate(i, []byte(gjson.GetBytes(o.Body, "params").Raw))
			}
		case translate.Timer:
			if o.Delay <= 0 {
				dr.problemf("output %d: Timer without a positive Delay", i)
			}
			lines = append(lines, Output{Marker: GotTimer, Text: o.Delay.String()})
			continue
		case translate.Note:
			if o.Method == "" {
				dr.problemf("output %d: Note without a repair name", i)
			}
			lines = append(lines, Output{Marker: GotNote, Text: strings.TrimSpace(o.Method + " " + string(o.Body))})
			continue
		default:
			dr.problemf("output %d has kind %d, which is not an output kind", i, o.Kind)
			continue
		}
		if !json.Valid(text) {
			dr.problemf("output %d is not valid JSON: %q", i, text)
		}
		if bytes.ContainsAny(text, "\r\n") {
			dr.problemf("output %d contains a raw newline, which breaks line framing: %q", i, text)
		}
		lines = append(lines, Output{Marker: marker, Text: string(text)})
	}
	if err != nil {
		lines = append(lines, Output{Marker: GotError, Text: strings.ReplaceAll(err.Error(), "\n", `\n`)})
	}
	return lines
}

func (dr *Driver) checkErrorObject(i int, body []byte) {
	v := gjson.ParseBytes(body)
	if translate.Valid(body) != nil || !v.IsObject() {
		dr.problemf("output %d: Fail body is not a JSON object: %q", i, body)
		return
	}
	if c := v.Get("code"); c.Type != gjson.Number || c.Raw != strconv.FormatInt(c.Int(), 10) {
		dr.problemf("output %d: Fail body has no integer code: %s", i, body)
	}
	if v.Get("message").Type != gjson.String {
		dr.problemf("output %d: Fail body has no string message: %s", i, body)
	}
}

// checkSessionUpdate checks the shape every session/update shares (schema:
// SessionNotification): sessionId beside update, update.sessionUpdate inside
// it.
func (dr *Driver) checkSessionUpdate(i int, body []byte) {
	if translate.Valid(body) != nil {
		return // reported as invalid JSON
	}
	if s := gjson.GetBytes(body, "sessionId"); s.Type != gjson.String || s.Str == "" {
		dr.problemf("output %d: session/update without a sessionId string: %s", i, body)
	}
	if u := gjson.GetBytes(body, "update.sessionUpdate"); u.Type != gjson.String || u.Str == "" {
		dr.problemf("output %d: session/update without update.sessionUpdate: %s", i, body)
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return bytes.Clone(b)
}

// canonical is the map key of a raw JSON value (ids): compacted bytes.
func canonical(raw []byte) string {
	var b bytes.Buffer
	if err := json.Compact(&b, bytes.TrimSpace(raw)); err != nil {
		return string(raw)
	}
	return b.String()
}
