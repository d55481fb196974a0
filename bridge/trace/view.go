package trace

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"slices"
	"strconv"

	"github.com/tidwall/gjson"
)

//go:embed view.html
var viewHTML string

var viewTmpl = template.Must(template.New("view").Parse(viewHTML))

// viewRow is one record as the view draws it.
type viewRow struct {
	I       int
	Note    bool
	Kind    string
	Hop     string
	Dir     string
	Link    int
	Session string
	Method  string
	Label   string
	// Side is "editor" or "agent": which half of the diagram the arrow
	// spans; Right says it points toward the agent.
	Side  string
	Right bool
	// Pair is the index of the request's response or the response's
	// request; -1 when there is none.
	Pair int
	Ms   string
}

type viewData struct {
	Title    string
	Rows     []viewRow
	Pretty   []string
	Sessions []string
	Methods  []string
	Arrows   int
	Notes    int
}

// WriteHTML writes recs as one self-contained HTML page (inline CSS and
// script, no network): a sequence diagram with editor, bridge and agent
// lanes, one arrow per message, notes on the bridge lane, a JSON panel for
// the clicked arrow, and filters by session and method.
func WriteHTML(w io.Writer, title string, recs []Record) error {
	d := viewData{Title: title, Rows: make([]viewRow, len(recs)), Pretty: make([]string, len(recs))}
	open := map[string]int{} // hop, link, direction and id of a request → its index
	for i, r := range recs {
		row := viewRow{I: i, Kind: r.Kind, Hop: r.Hop, Dir: r.Dir, Link: r.Link, Session: r.Session,
			Method: r.Method, Pair: -1, Ms: strconv.FormatFloat(float64(r.TNs)/1e6, 'f', 3, 64)}
		d.Pretty[i] = pretty(r)
		if r.Kind == KindNote {
			row.Note = true
			row.Label = r.Note
			d.Notes++
		} else {
			d.Arrows++
			row.Side = r.Hop
			// Toward the agent: the editor's messages in, the bridge's
			// messages out to the agent.
			row.Right = (r.Hop == "editor") == (r.Dir == "in")
			row.Label = label(r)
			key := func(dir string) string { return fmt.Sprintf("%s|%d|%s|%s", r.Hop, r.Link, dir, r.ID) }
			switch r.Kind {
			case KindRequest:
				open[key(r.Dir)] = i
			case KindResponse, KindError:
				other := "in"
				if r.Dir == "in" {
					other = "out"
				}
				if j, ok := open[key(other)]; ok && len(r.ID) > 0 {
					delete(open, key(other))
					row.Pair = j
					d.Rows[j].Pair = i
					row.Method = d.Rows[j].Method
					if row.Session == "" {
						row.Session = d.Rows[j].Session
					}
				}
			}
		}
		if row.Session != "" && !slices.Contains(d.Sessions, row.Session) {
			d.Sessions = append(d.Sessions, row.Session)
		}
		if r.Method != "" && !slices.Contains(d.Methods, r.Method) {
			d.Methods = append(d.Methods, r.Method)
		}
		d.Rows[i] = row
	}
	slices.Sort(d.Methods)
	return viewTmpl.Execute(w, d)
}

// label is the text on an arrow.
func label(r Record) string {
	id := ""
	if len(r.ID) > 0 {
		id = " #" + string(r.ID)
	}
	switch r.Kind {
	case KindRequest, KindNotification:
		return r.Method + id
	case KindResponse:
		return "result" + id
	case KindError:
		return fmt.Sprintf("error %s%s", gjson.GetBytes(r.Msg, "error.code").Raw, id)
	}
	if r.Method != "" {
		return r.Method
	}
	return r.Kind
}

// pretty is what the JSON panel shows for r: the message indented (its
// numbers and strings byte-exact), the raw text, or the note record.
func pretty(r Record) string {
	var buf bytes.Buffer
	switch {
	case len(r.Msg) > 0:
		if json.Indent(&buf, r.Msg, "", "  ") == nil {
			return buf.String()
		}
		return string(r.Msg)
	case r.Kind != KindNote:
		return r.Raw
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	return string(b)
}
