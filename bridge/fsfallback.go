package bridge

import (
	"encoding/json"
	"errors"
	"io/fs"
	"path/filepath"

	"github.com/acp-bridge/acp-bridge/bridge/localfs"
	"github.com/acp-bridge/acp-bridge/translate"
	"github.com/tidwall/gjson"
)

// servesFSLocally reports whether the engine must serve method itself
// because the editor did not advertise the capability (agents must not call
// what the editor lacks, ACP spec, File System; translators always ask, the engine
// decides).
func (e *engine) servesFSLocally(method string) bool {
	switch method {
	case "fs/read_text_file":
		return !e.editorCaps.fsRead
	case "fs/write_text_file":
		return !e.editorCaps.fsWrite
	}
	return false
}

// serveLocalFS answers an fs call from disk, confined to the session's cwd
// and additional directories,
// off the loop, and feeds the answer back to the translator as the editor's.
func (e *engine) serveLocalFS(l *link, o translate.Out, s *session) {
	method := o.Method
	reply := func(result json.RawMessage, err *translate.Error) {
		m := translate.Msg{Kind: translate.Response, Ref: o.Ref, Body: result}
		if err != nil {
			m.Body, m.Error = nil, err.JSON()
		}
		e.feed(l, m)
	}
	if s == nil || s.cwd == "" {
		reply(nil, translate.Errorf(translate.CodeInvalidParams, "%s: unknown session, so no directory to serve files from", method))
		return
	}
	p := gjson.ParseBytes(o.Body)
	path := p.Get("path").Str
	root := rootFor(path, s)
	line, limit := int(p.Get("line").Int()), int(p.Get("limit").Int())
	content := p.Get("content").Str
	e.helperWG.Add(1)
	go func() {
		defer e.helperWG.Done()
		var result json.RawMessage
		var err error
		if method == "fs/read_text_file" {
			var text string
			text, err = localfs.Read(e.ctx, root, path, line, limit, int64(e.b.MaxMessage))
			result, _ = json.Marshal(map[string]string{"content": text})
		} else {
			err = localfs.Write(e.ctx, root, path, content, int64(e.b.MaxMessage))
			result = json.RawMessage("{}")
		}
		e.post(func() {
			if l.down != nil {
				return
			}
			if err != nil {
				e.log.Warn("local file access refused or failed", "method", method, "path", path, "error", err)
				reply(nil, fsError(path, err))
				return
			}
			reply(result, nil)
		})
	}()
}

func fsError(path string, err error) *translate.Error {
	switch {
	case errors.Is(err, localfs.ErrOutsideRoot), errors.Is(err, localfs.ErrNotAbsolute),
		errors.Is(err, localfs.ErrNotRegular), errors.Is(err, localfs.ErrTooLarge):
		return translate.Errorf(translate.CodeInvalidParams, "%v", err)
	case errors.Is(err, fs.ErrNotExist):
		return translate.Errorf(translate.CodeResourceNotFound, "%s: no such file", path)
	}
	return translate.Errorf(translate.CodeInternalError, "%v", err)
}

// rootFor picks the directory a path is served from: the first of the
// session's cwd and additionalDirectories that holds it lexically (links are
// checked by localfs against that root), else cwd, which then refuses it.
func rootFor(path string, s *session) string {
	for _, dir := range append([]string{s.cwd}, s.dirs...) {
		if rel, err := filepath.Rel(dir, filepath.Clean(path)); err == nil && filepath.IsLocal(rel) {
			return dir
		}
	}
	return s.cwd
}
