package wire

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Standard JSON-RPC and ACP error codes (schema: ErrorCode).
const (
	CodeParseError       = -32700
	CodeInvalidRequest   = -32600
	CodeMethodNotFound   = -32601
	CodeInvalidParams    = -32602
	CodeInternalError    = -32603
	CodeRequestCancelled = -32800
	CodeAuthRequired     = -32000
	CodeResourceNotFound = -32002
)

var standardMessages = map[int]string{
	CodeParseError:       "Parse error",
	CodeInvalidRequest:   "Invalid request",
	CodeMethodNotFound:   "Method not found",
	CodeInvalidParams:    "Invalid params",
	CodeInternalError:    "Internal error",
	CodeRequestCancelled: "Request cancelled",
	CodeAuthRequired:     "Authentication required",
	CodeResourceNotFound: "Resource not found",
}

// Error is a JSON-RPC error that keeps its code through Go error wrapping:
// errors.Is matches by code, so fmt.Errorf("%w: …") adds detail while the
// code still reaches the wire. Reason is a sentence a user can act on: it is
// the wire "message" (editors show only that, so it must say what happened
// and what to do) and is repeated as data.reason.
type Error struct {
	Code    int
	Message string // the code's standard text, used when Reason is empty
	Reason  string
	// Data holds extra members of the error's data object (beside
	// "reason"), already JSON-encoded.
	Data map[string]json.RawMessage
}

// Sentinels for errors.Is.
var (
	ErrParse          = &Error{Code: CodeParseError, Message: "Parse error"}
	ErrInvalidRequest = &Error{Code: CodeInvalidRequest, Message: "Invalid request"}
	ErrMethodNotFound = &Error{Code: CodeMethodNotFound, Message: "Method not found"}
	ErrInvalidParams  = &Error{Code: CodeInvalidParams, Message: "Invalid params"}
	ErrInternal       = &Error{Code: CodeInternalError, Message: "Internal error"}
)

// Errorf returns an Error with code's standard message and a formatted reason.
func Errorf(code int, format string, args ...any) *Error {
	msg, ok := standardMessages[code]
	if !ok {
		msg = "Error"
	}
	return &Error{Code: code, Message: msg, Reason: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("%s (%d)", e.Message, e.Code)
	}
	return fmt.Sprintf("%s (%d): %s", e.Message, e.Code, e.Reason)
}

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// With returns a copy of e whose data carries key with value (encoded to
// JSON; a value that cannot be encoded is dropped).
func (e *Error) With(key string, value any) *Error {
	c := *e
	c.Data = make(map[string]json.RawMessage, len(e.Data)+1)
	for k, v := range e.Data {
		c.Data[k] = v
	}
	if b, err := json.Marshal(value); err == nil {
		c.Data[key] = b
	}
	return &c
}

// JSON returns the wire form of the error object. The message is the
// reason when there is one, else the code's standard text.
func (e *Error) JSON() json.RawMessage {
	v := struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data,omitempty"`
	}{Code: e.Code, Message: e.Message}
	if e.Reason != "" || len(e.Data) > 0 {
		data := make(map[string]json.RawMessage, len(e.Data)+1)
		for k, val := range e.Data {
			data[k] = val
		}
		if e.Reason != "" {
			v.Message = e.Reason
			data["reason"], _ = json.Marshal(e.Reason)
		}
		v.Data = data
	}
	b, _ := json.Marshal(v)
	return b
}

// Envelope is the routing view of one JSON-RPC message. Every field is a
// sub-slice of the parsed frame (borrowed from it); nothing below the
// envelope is decoded, so params and results keep every byte they had.
type Envelope struct {
	// Version is the raw "jsonrpc" value, "" when absent.
	Version string
	// Frame is the whole message, and IDAt the offset of ID within it.
	Frame []byte
	IDAt  int
	// ID is the raw id ("0", "\"abc\"", "null"…); nil when the key is absent.
	ID     json.RawMessage
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
	// SessionID is params.sessionId when it is a string without escapes,
	// and UpdateKind params.update.sessionUpdate likewise ("" otherwise):
	// read in the same pass, since the engine and the relay route on them.
	// Like the other fields they share the frame's memory: clone them to
	// keep them past the frame.
	SessionID, UpdateKind string
	// Plain says the frame holds no line break: it was read as the
	// compact form the SDKs write a text chunk in, where every byte
	// outside its strings is fixed and its strings hold no control
	// characters. (False says nothing.)
	Plain bool
}

// IsRequest, IsNotification and IsResponse classify a parsed envelope. An id
// key, even null, makes a message with a method a request (JSON-RPC 2.0).
func (e *Envelope) IsRequest() bool      { return e.Method != "" && e.ID != nil }
func (e *Envelope) IsNotification() bool { return e.Method != "" && e.ID == nil }
func (e *Envelope) IsResponse() bool     { return e.Method == "" && e.ID != nil }

// ParseEnvelope checks that frame is one JSON-RPC 2.0 message and returns its
// envelope. The error, when not nil, says how to answer: -32700 for bytes that
// are not JSON (or not UTF-8), -32600 for JSON that is not a valid message.
// On a -32600 the returned envelope still carries the id when one could be
// read, so the answer can name it. ParseEnvelope does not require the
// "jsonrpc" member; callers that must, check Version.
func ParseEnvelope(frame []byte) (Envelope, *Error) {
	var env Envelope
	err := ParseEnvelopeInto(&env, frame)
	return env, err
}

// ParseEnvelopeInto is ParseEnvelope writing the envelope to *env: an
// envelope is 25 words, whose copies from the scanner to ParseEnvelope to
// its caller were a tenth of a streamed update's cost.
func ParseEnvelopeInto(env *Envelope, frame []byte) *Error {
	if scanUpdate(env, frame) {
		return nil // the stream's usual message, read the short way
	}
	var err *Error
	*env, err = scanEnvelope(frame)
	if err != nil && err.Code == CodeParseError {
		// Nothing read from a text that is not JSON can be trusted.
		*env = Envelope{}
	}
	return err
}

// RequestFrame builds a JSON-RPC request. params nil omits the key, which is
// how the legacy 0.0.x protocol sends parameterless methods.
func RequestFrame(id json.RawMessage, method string, params json.RawMessage) []byte {
	b := make([]byte, 0, len(params)+len(method)+len(id)+48)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"method":`...)
	b = AppendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// NotificationFrame builds a JSON-RPC notification; params nil omits the key.
func NotificationFrame(method string, params json.RawMessage) []byte {
	b := make([]byte, 0, len(params)+len(method)+40)
	b = append(b, `{"jsonrpc":"2.0","method":`...)
	b = AppendString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// ResultFrame builds a successful JSON-RPC response carrying result as is.
func ResultFrame(id, result json.RawMessage) []byte {
	b := make([]byte, 0, len(result)+len(id)+36)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// ErrorFrame builds a failed JSON-RPC response carrying the error object as is.
func ErrorFrame(id, errObj json.RawMessage) []byte {
	b := make([]byte, 0, len(errObj)+len(id)+36)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":`...)
	b = append(b, errObj...)
	return append(b, '}')
}

// IntID is the raw JSON form of a numeric agent-hop id.
func IntID(n uint64) json.RawMessage {
	return strconv.AppendUint(make([]byte, 0, 20), n, 10)
}
