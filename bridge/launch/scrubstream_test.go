package launch

import (
	"bytes"
	"strings"
	"testing"
)

// However a stream's writes split it, secrets come out replaced, and
// everything else comes out as it went in.
func TestStreamScrubber_AnySplit(t *testing.T) {
	secrets := []string{"Bearer canary-7f3a9c21e0", "canary-7f3a9c21e0", "s3cr", "abcdXY"}
	text := "panic: token Bearer canary-7f3a9c21e0 refused\n" +
		"goroutine 1 [running]: canary-7f3a9c21e (a prefix only) canary-7f3a9c21e0canary-7f3a9c21e0\n" +
		"s3cs3cr abcdabcdXY abcdX s3c"
	want := NewScrubber(secrets...).Scrub(text)
	if strings.Contains(want, "canary-7f3a9c21e0") || !strings.Contains(want, "canary-7f3a9c21e (a prefix") {
		t.Fatalf("Scrub itself is off: %q", want)
	}
	check := func(name string, chunks []string) {
		t.Helper()
		var out bytes.Buffer
		s := NewStreamScrubber(&out, secrets...)
		for _, c := range chunks {
			if n, err := s.Write([]byte(c)); n != len(c) || err != nil {
				t.Fatalf("%s: Write = %d, %v", name, n, err)
			}
		}
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != want {
			t.Errorf("%s:\n got %q\nwant %q", name, out.String(), want)
		}
	}
	var bytewise []string
	for i := range len(text) {
		bytewise = append(bytewise, text[i:i+1])
	}
	check("one byte per write", bytewise)
	for i := range len(text) {
		for _, j := range []int{i, i + 1, i + 7, i + 17} {
			if j <= len(text) {
				check("split", []string{text[:i], text[i:j], text[j:]})
			}
		}
	}
}

// A line that ends cannot be a secret's start: it is passed on at once, not
// held back for the next write.
func TestStreamScrubber_LinesNotHeld(t *testing.T) {
	var out bytes.Buffer
	s := NewStreamScrubber(&out, "canary-7f3a9c21e0")
	s.Write([]byte("log line\n"))
	if out.String() != "log line\n" {
		t.Errorf("after a whole line, wrote %q", out.String())
	}
	s.Write([]byte("then canary-7f"))
	if out.String() != "log line\nthen " {
		t.Errorf("a secret's possible start was written: %q", out.String())
	}
	s.Flush()
	if out.String() != "log line\nthen canary-7f" {
		t.Errorf("Flush wrote %q", out.String())
	}
}

func TestStreamScrubber_NoSecrets(t *testing.T) {
	var out bytes.Buffer
	s := NewStreamScrubber(&out, "", "ab")
	s.Write([]byte("a"))
	if out.String() != "a" {
		t.Errorf("with no secret worth scrubbing, wrote %q", out.String())
	}
}

// Crash output quoting a URL echoes its query token URL-encoded: the
// stderr filter knows those forms too.
func TestStreamScrubber_URLEncoded(t *testing.T) {
	var out bytes.Buffer
	s := NewStreamScrubber(&out, "p+q/Zq9 x&y")
	for _, chunk := range []string{"panic: GET /acp?token=p%2Bq%2F", "Zq9+x%26y failed; ", "lower p%2bq%2fZq9+x%26y, path p+q%2FZq9%20x&y\n"} {
		s.Write([]byte(chunk))
	}
	s.Flush()
	if strings.Contains(out.String(), "Zq9") {
		t.Errorf("stderr filter let the token through: %q", out.String())
	}
}
