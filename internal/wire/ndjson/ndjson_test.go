package ndjson_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/acp-bridge/acp-bridge/internal/wire/ndjson"
)

func readAll(t *testing.T, r *ndjson.Reader) (lines []string, errs []error) {
	t.Helper()
	for {
		line, err := r.Next()
		if errors.Is(err, io.EOF) {
			return lines, errs
		}
		if err != nil {
			var tl *ndjson.TooLongError
			if !errors.As(err, &tl) {
				t.Fatalf("Next: %v", err)
			}
			errs = append(errs, err)
			lines = append(lines, "<too long>")
			continue
		}
		lines = append(lines, string(line))
	}
}

func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		max      int
		want     []string
	}{
		{"lf", "a\nb\n", 0, []string{"a", "b"}},
		{"crlf", "a\r\nb\r\n", 0, []string{"a", "b"}},
		{"blank lines", "\n\na\n \r\n\t\nb\n\n", 0, []string{"a", "b"}},
		{"no final newline", "a\nb", 0, []string{"a", "b"}},
		{"invalid utf-8 passes framing", "\xff\xfe\n{}\n", 0, []string{"\xff\xfe", "{}"}},
		{"exactly max", "abcd\nx\n", 4, []string{"abcd", "x"}},
		{"exactly max crlf", "abcd\r\nx\n", 4, []string{"abcd", "x"}},
		{"over max then ok", "abcde\nxy\n", 4, []string{"<too long>", "xy"}},
		{"over max at eof", "ok\nabcdefgh", 4, []string{"ok", "<too long>"}},
		{"over max many chunks", strings.Repeat("z", 200000) + "\nnext\n", 1000, []string{"<too long>", "next"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := readAll(t, ndjson.NewReader(strings.NewReader(tc.in), tc.max))
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReader_TooLongKeepsHead(t *testing.T) {
	in := `{"jsonrpc":"2.0","id":42,"method":"x","params":"` + strings.Repeat("a", 5000) + "\"}\n"
	r := ndjson.NewReader(iotest.OneByteReader(strings.NewReader(in)), 100)
	_, err := r.Next()
	var tl *ndjson.TooLongError
	if !errors.As(err, &tl) || !bytes.HasPrefix(tl.Head, []byte(`{"jsonrpc":"2.0","id":42`)) || tl.Max != 100 {
		t.Fatalf("err = %v (head %q)", err, tl.Head)
	}
}

func TestReader_40MiBLine(t *testing.T) {
	big := bytes.Repeat([]byte("A"), 40<<20)
	in := append(append([]byte(`{"p":"`), big...), "\"}\r\n{}\n"...)
	r := ndjson.NewReader(bytes.NewReader(in), 0)
	line, err := r.Next()
	if err != nil || len(line) != len(big)+8 {
		t.Fatalf("len = %d, err = %v", len(line), err)
	}
	if line, err := r.Next(); err != nil || string(line) != "{}" {
		t.Fatalf("next = %q, %v", line, err)
	}
}

func TestReader_ReturnsFreshSlices(t *testing.T) {
	r := ndjson.NewReader(strings.NewReader("aaaa\nbbbb\n"), 0)
	first, _ := r.Next()
	r.Next()
	if string(first) != "aaaa" {
		t.Errorf("first line changed to %q after the next read", first)
	}
}

// BenchmarkReader_Linear shows reading is linear: the per-byte cost of one
// 32 MiB line is the same order as that of many small lines.
func BenchmarkReader_Linear(b *testing.B) {
	big := append(bytes.Repeat([]byte("x"), 32<<20), '\n')
	b.SetBytes(int64(len(big)))
	for b.Loop() {
		r := ndjson.NewReader(bytes.NewReader(big), 0)
		if _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("a\nb\r\n\n"), 4)
	f.Add([]byte("abcdefgh\nx"), 3)
	f.Add([]byte("\xff\xfe\r\n"+strings.Repeat("[", 3000)+"\n"), 64)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max <= 0 || max > 1<<16 {
			max = 8
		}
		r := ndjson.NewReader(bytes.NewReader(in), max)
		total := 0
		for {
			line, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			var tl *ndjson.TooLongError
			if err != nil && !errors.As(err, &tl) {
				t.Fatalf("unexpected error %v", err)
			}
			if err == nil {
				if len(line) > max || bytes.ContainsRune(line, '\n') || len(bytes.TrimSpace(line)) == 0 {
					t.Fatalf("bad line %q (max %d)", line, max)
				}
				total += len(line)
			}
			if total > len(in) {
				t.Fatal("returned more bytes than were read")
			}
		}
	})
}
