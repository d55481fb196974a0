package v0

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
)

// Journal is what one agent connection (one legacy agent process, or one
// WebSocket connection) saw, read back by ReadJournals.
type Journal struct {
	// File is the journal's path.
	File string
	// Pid and Cwd are the agent process's id and working directory.
	Pid int
	Cwd string
	// Transport is "stdio" or "ws".
	Transport string
	// Started is when the connection began.
	Started time.Time
	// Received holds every line the agent read, verbatim, in order.
	Received []string
	// Sent holds every line the agent wrote, in order.
	Sent []string
	// Events are the script's milestones ("cancel", "outcome allow",
	// "path /x", "eof", "crash", …) and "violation: …" entries for every
	// rule of the legacy protocol the bridge broke.
	Events []string
}

// Requests returns the received requests with method, as raw lines.
func (j Journal) Requests(method string) []string {
	var out []string
	for _, l := range j.Received {
		if gjson.Get(l, "method").Str == method {
			out = append(out, l)
		}
	}
	return out
}

// Violations returns the events that record a broken protocol rule.
func (j Journal) Violations() []string {
	var out []string
	for _, e := range j.Events {
		if strings.HasPrefix(e, "violation: ") {
			out = append(out, e)
		}
	}
	return out
}

// HasEvent reports whether ev was recorded.
func (j Journal) HasEvent(ev string) bool { return slices.Contains(j.Events, ev) }

// entry is one journal line.
type entry struct {
	Kind      string `json:"k"` // start, recv, sent, event
	Line      string `json:"l,omitempty"`
	Pid       int    `json:"pid,omitempty"`
	Cwd       string `json:"cwd,omitempty"`
	Transport string `json:"transport,omitempty"`
	Started   int64  `json:"started,omitempty"`
}

// seq numbers journals within one process (WebSocket agents share a pid).
var seq atomic.Int64

// journal appends entries to one file, one whole line per write, so a
// concurrent reader sees at most an incomplete last line. A nil *journal
// (no directory configured) records nothing.
type journal struct {
	mu sync.Mutex
	f  *os.File
}

func openJournal(dir, transport, cwd string) (*journal, error) {
	if dir == "" {
		return nil, nil
	}
	name := filepath.Join(dir, fmt.Sprintf("agent-%d-%d.jsonl", os.Getpid(), seq.Add(1)))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fake v0 agent: journal: %w", err)
	}
	j := &journal{f: f}
	j.write(entry{Kind: "start", Pid: os.Getpid(), Cwd: cwd, Transport: transport, Started: time.Now().UnixNano()})
	return j, nil
}

func (j *journal) write(e entry) {
	if j == nil {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.f.Write(append(b, '\n'))
}

func (j *journal) received(line []byte) { j.write(entry{Kind: "recv", Line: string(line)}) }
func (j *journal) sent(line string)     { j.write(entry{Kind: "sent", Line: line}) }
func (j *journal) event(ev string)      { j.write(entry{Kind: "event", Line: ev}) }

func (j *journal) close() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_ = j.f.Close()
}

// ReadJournals reads every journal in dir, oldest connection first. Agents
// may still be writing; an incomplete last line is ignored.
func ReadJournals(dir string) ([]Journal, error) {
	names, err := filepath.Glob(filepath.Join(dir, "agent-*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []Journal
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		j := Journal{File: name}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var e entry
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue // being written
			}
			switch e.Kind {
			case "start":
				j.Pid, j.Cwd, j.Transport, j.Started = e.Pid, e.Cwd, e.Transport, time.Unix(0, e.Started)
			case "recv":
				j.Received = append(j.Received, e.Line)
			case "sent":
				j.Sent = append(j.Sent, e.Line)
			case "event":
				j.Events = append(j.Events, e.Line)
			}
		}
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b Journal) int { return a.Started.Compare(b.Started) })
	return out, nil
}
