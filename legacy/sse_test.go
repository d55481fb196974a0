package legacy

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func readAllSSE(t testing.TB, r io.Reader, max int) ([]string, error) {
	s := newSSEReader(r, max)
	var out []string
	for {
		d, err := s.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if len(d) > max {
			t.Fatalf("event of %d bytes passed the limit %d", len(d), max)
		}
		out = append(out, string(d))
	}
}

func TestSSEReader(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"lf", "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n", []string{`{"a":1}`, `{"b":2}`}},
		{"crlf", "data: x\r\n\r\ndata: y\r\n\r\n", []string{"x", "y"}},
		{"lone cr", "data: x\r\rdata: y\r\r", []string{"x", "y"}},
		{"keep-alive and fields", ":\n\nevent: message\nid: 7\nretry: 10\ndata: x\n\n:\n\n", []string{"x"}},
		{"no space", "data:x\n\n", []string{"x"}},
		{"two spaces keep one", "data:  x\n\n", []string{" x"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"bom", "\xef\xbb\xbfdata: x\n\n", []string{"x"}},
		{"last event without blank line", "data: x\n\ndata: y", []string{"x", "y"}},
		{"empty data is an event", "data\n\n", []string{""}},
		{"no data no event", "event: x\n\n\n\n", nil},
		{"data field only by exact name", "datum: x\ndata2: y\n\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []io.Reader{strings.NewReader(tc.in), iotest.OneByteReader(strings.NewReader(tc.in))} {
				got, err := readAllSSE(t, r, 1<<10)
				if err != nil || !slices.Equal(got, tc.want) {
					t.Errorf("%q: got %q, %v; want %q", tc.in, got, err, tc.want)
				}
			}
		})
	}
}

func TestSSEReaderLimit(t *testing.T) {
	in := "data: " + strings.Repeat("x", 100) + "\n\n"
	if _, err := readAllSSE(t, strings.NewReader(in), 50); !errors.Is(err, errSSETooLong) {
		t.Errorf("a 100-byte event under a 50-byte limit: %v", err)
	}
	in = "data: " + strings.Repeat("x", 30) + "\ndata: " + strings.Repeat("y", 30) + "\n\n"
	if _, err := readAllSSE(t, strings.NewReader(in), 50); !errors.Is(err, errSSETooLong) {
		t.Errorf("two 30-byte data lines under a 50-byte limit: %v", err)
	}
	// A long comment line is bounded too: nothing is held without limit.
	in = ":" + strings.Repeat("z", 1000) + "\n\ndata: x\n\n"
	if _, err := readAllSSE(t, strings.NewReader(in), 50); !errors.Is(err, errSSETooLong) {
		t.Errorf("a 1000-byte comment under a 50-byte limit: %v", err)
	}
}

// FuzzSSEReader: any input is read without a panic and without an event
// over the limit; and any messages written as events, with any mix of line
// ends and keep-alives, are read back as they were.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\r\n\r\n:\n\ndata: x\rdata: y\r\r"), uint8(0))
	f.Add([]byte("\xef\xbb\xbfdata:\n\ndata"), uint8(1))
	f.Add([]byte("data: \xff\xfe\n\n"), uint8(2))
	f.Fuzz(func(t *testing.T, in []byte, style uint8) {
		_, _ = readAllSSE(t, bytes.NewReader(in), 256)

		// Round trip: the input's lines as messages (no CR or LF in them).
		var msgs []string
		for _, m := range bytes.FieldsFunc(in, func(r rune) bool { return r == '\n' || r == '\r' }) {
			msgs = append(msgs, string(m))
		}
		ends := []string{"\n", "\r\n", "\r"}
		var b strings.Builder
		for i, m := range msgs {
			end := ends[(int(style)+i)%3]
			if style&4 != 0 {
				b.WriteString(":" + end + end)
			}
			b.WriteString("data: " + m + end + end)
		}
		got, err := readAllSSE(t, strings.NewReader(b.String()), 1<<20)
		if err != nil || !slices.Equal(got, msgs) {
			t.Fatalf("round trip of %q: got %q, %v", msgs, got, err)
		}
	})
}
