package store

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
	"github.com/tidwall/gjson"
)

// readAll reads sid with a Reader, calling each for every record.
func readAll(t *testing.T, s *Store, sid string, each func(Record)) (skipped int) {
	t.Helper()
	ch := make(chan struct {
		r   *Reader
		err error
	}, 1)
	s.Read(sid, func(r *Reader, err error) {
		ch <- struct {
			r   *Reader
			err error
		}{r, err}
	})
	res := <-ch
	if res.err != nil {
		t.Fatal(res.err)
	}
	defer res.r.Close()
	for {
		rec, err := res.r.Next()
		if errors.Is(err, io.EOF) {
			return res.r.Skipped()
		}
		if err != nil {
			t.Fatal(err)
		}
		each(rec)
	}
}

// A 64 MiB transcript (16 MiB under the race detector) is read with
// memory bounded by its largest record, not its size: the live heap,
// sampled while iterating, grows by at most twice the largest record and
// the reader's buffer.
func TestStore_ReadLargeTranscriptBoundedMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s := open(t, Options{Dir: dir})
	create(t, s, "big", Meta{Cwd: "/w"})
	s.Close()
	f, err := os.OpenFile(filepath.Join(dir, "big.ndjson"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	const large = 2 << 20
	size := 64 << 20
	if raceEnabled {
		size = 16 << 20
	}
	pad := strings.Repeat("x", 1000)
	n, written := 0, 0
	for written < size {
		text := pad
		if n%20000 == 10000 { // a few large records among the small
			text = strings.Repeat("y", large)
		}
		k, _ := fmt.Fprintf(w, `{"t":"u","u":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"%s"}},"n":%d}`+"\n", text, n)
		written += k
		n++
	}
	w.Flush()
	f.Close()

	s2 := open(t, Options{Dir: dir})
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	got := 0
	skipped := readAll(t, s2, "big", func(r Record) {
		if got%2000 == 0 || len(r.Body) > large {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		runtime.KeepAlive(r)
		got++
	})
	if got != n || skipped != 0 {
		t.Fatalf("read %d of %d records, %d skipped", got, n, skipped)
	}
	if growth := peak - base; growth > 2*large+1<<20 {
		t.Fatalf("the live heap grew by %d MiB reading a %d MiB transcript; want at most twice the largest record (%d MiB) and a buffer",
			growth>>20, written>>20, large>>20)
	} else {
		t.Logf("%d MiB transcript, %d records: live heap grew by at most %.1f MiB", written>>20, n, float64(growth)/(1<<20))
	}
}

// FuzzReader: whatever a transcript file holds, Next never panics, and
// hands out only valid UTF-8 and bodies that are valid JSON.
func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"t":"meta","cwd":"/w"}` + "\n" + `{"t":"u","u":{"sessionUpdate":"plan"},"x":1}` + "\n" + `{"t":"update","body":{"jsonrpc":"2.0","params":{"a":1}}}`))
	f.Add([]byte("{\"t\":\"prompt\",\"body\":{\"text\":\"\xff\"}}\n{\"t\":\"u\",\"u\":1,\"u\":2}\n{\"t\":\"u\",\"u\":\n{\"t\":\"stop\""))
	f.Add([]byte(`{"t":"u","u":"\ud800"}` + "\n" + `{"t":"update","body":{"jsonrpc":1}}` + "\n\n\r\n" + `{"t":"gap","body":{"lost":2}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newReader("s\xff1", Meta{}, nil, strings.NewReader(string(data)), hclog.NewNullLogger())
		for range len(data) + 1 {
			rec, err := r.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(rec)
			if err != nil {
				t.Fatalf("record %+v: %v", rec, err)
			}
			if !utf8.Valid(b) || !utf8.Valid(rec.Body) || !utf8.ValidString(rec.Kind+rec.Agent+rec.Dialect+rec.Cwd+rec.Backend+rec.Link) {
				t.Fatalf("invalid UTF-8 handed out: %q", b)
			}
			if len(rec.Body) > 0 && !json.Valid(rec.Body) {
				t.Fatalf("body is not JSON: %q", rec.Body)
			}
		}
		t.Fatal("Next does not reach the end")
	})
}

// A line longer than any record the writer stores (one past the
// transcript's cap: a hand-edited file, a disk that lost its newlines) is
// read past, keeping none of it, and counted as skipped; the records after
// it are read. Loading a transcript with a 200 MB unterminated line once
// cost 817 MB.
func TestReader_LineOverTheCapIsSkippedUnkept(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	const capBytes = 1 << 20
	s := open(t, Options{Dir: dir, MaxSessionBytes: capBytes})
	create(t, s, "s1", Meta{})
	s.Append("s1", Record{Kind: KindPrompt, Body: json.RawMessage(`{"prompt":[{"type":"text","text":"first"}]}`), Sync: true})
	s.Close()
	tp := filepath.Join(dir, "s1.ndjson")
	f, err := os.OpenFile(tp, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	good := `{"t":"prompt","body":{"prompt":[{"type":"text","text":"second"}]}}` + "\n"
	if _, err := f.WriteString(strings.Repeat("x", 4*capBytes) + "\n" + good + strings.Repeat("y", 8*capBytes)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s2 := open(t, Options{Dir: dir, MaxSessionBytes: capBytes})
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	tr, err := load(t, s2, "s1")
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	var texts []string
	for _, r := range tr.Records {
		if r.Kind == KindPrompt {
			texts = append(texts, gjson.GetBytes(r.Body, "prompt.0.text").Str)
		}
	}
	if strings.Join(texts, ",") != "first,second" {
		t.Errorf("read the prompts %q, want first and second", texts)
	}
	// Gathering a line up to the cap, by append, allocates some five times
	// the cap in all; gathering the 4 and 8 MiB lines whole allocated
	// some five times their size, 60 MiB.
	if got := ms.TotalAlloc - before; got > 24*capBytes {
		t.Errorf("reading 12 MiB of lines longer than the %d-byte cap allocated %d MiB: the lines were kept", capBytes, got>>20)
	}
}
