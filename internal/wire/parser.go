// Parser: the envelope scan for one stream of messages, which remembers
// the last text chunk's opening so that the next one like it is read by
// comparing that opening whole.

package wire

import (
	"strings"
)

// Parser is ParseEnvelopeInto for one stream of messages. A stream is
// mostly chunks of text of one session and one kind, which differ only in
// their text: a Parser keeps the opening of the last one it read (up to
// the text's opening quote), and reads a message that opens the same way
// by comparing that opening as a whole and scanning the text alone. What
// it finds is what ParseEnvelopeInto finds. The zero Parser is ready to
// use; a Parser belongs to one goroutine.
type Parser struct {
	head   []byte // the last chunk's opening, through the text's quote
	sidEnd int    // where its session id's closing quote ends
	kind   string // its kind, not sharing the frame's memory
}

// maxHead bounds the opening a Parser keeps: a session id longer than a
// few hundred bytes is not worth remembering.
const maxHead = 512

// ParseInto is ParseEnvelopeInto(env, frame).
func (p *Parser) ParseInto(env *Envelope, frame []byte) *Error {
	if n := len(p.head); n > 0 && len(frame) > n && string(frame[:n]) == string(p.head) &&
		plainChunk(env, frame, p.sidEnd, n-1, p.kind) {
		return nil
	}
	err := ParseEnvelopeInto(env, frame)
	if err == nil && env.Plain {
		p.remember(env, frame)
	}
	return err
}

// remember keeps the opening of frame, a chunk of text read as Plain:
// updateOpening, the session id, updateMiddle, the kind, textContent.
func (p *Parser) remember(env *Envelope, frame []byte) {
	sidEnd := len(updateOpening) + len(env.SessionID) + 1
	n := sidEnd + len(updateMiddle) + len(env.UpdateKind) + 1 + len(textContent)
	if n > maxHead || n >= len(frame) || frame[n-1] != '"' {
		p.head = p.head[:0]
		return
	}
	if env.UpdateKind != p.kind {
		// The constant for a kind the protocol knows (whose callers then
		// compare pointers), a copy otherwise: it may share the frame's
		// memory.
		if k, ok := updateKind([]byte(env.UpdateKind)); ok {
			p.kind = k
		} else {
			p.kind = strings.Clone(env.UpdateKind)
		}
	}
	p.head, p.sidEnd = append(p.head[:0], frame[:n]...), sidEnd
}
