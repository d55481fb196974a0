// A session's settings: its mode, permission mode, model and config
// options, set by the editor through Claude Code's control requests and
// announced back as updates.

package claude

import (
	"encoding/json"
	"slices"

	"github.com/acp-bridge/acp-bridge/translate"
)

func (t *translator) setMode(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string `json:"sessionId"`
		ModeID    string `json:"modeId"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	if !isMode(p.ModeID) {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown mode %q: Claude Code's modes are %s", p.ModeID, modeList())}
	}
	return []translate.Out{t.setPermissionMode(m.Ref, m.Method, p.ModeID)}
}

func (t *translator) setPermissionMode(ref translate.Ref, method, mode string) translate.Out {
	return t.controlRequest(&ctlRequest{kind: ctlSetMode, ref: ref, method: method, value: mode}, struct {
		Subtype string `json:"subtype"`
		Mode    string `json:"mode"`
	}{"set_permission_mode", mode})
}

func (t *translator) setConfigOption(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string          `json:"sessionId"`
		ConfigID  string          `json:"configId"`
		Value     json.RawMessage `json:"value"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	var value string
	if json.Unmarshal(p.Value, &value) != nil {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "option %q takes a value id string, not %s", p.ConfigID, p.Value)}
	}
	switch p.ConfigID {
	case "mode":
		if !isMode(value) {
			return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown mode %q: Claude Code's modes are %s", value, modeList())}
		}
		return []translate.Out{t.setPermissionMode(m.Ref, m.Method, value)}
	case "model":
		return t.requestModel(m, value)
	}
	return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown config option %q: the options are mode and model", p.ConfigID)}
}

// setModel serves the unstable session/set_model (since removed from the
// schema in favour of a model config option) that
// 2025-era editors still send: the same as the model config option.
func (t *translator) setModel(m translate.Msg) []translate.Out {
	var p struct {
		SessionID string `json:"sessionId"`
		ModelID   string `json:"modelId"`
	}
	_ = json.Unmarshal(m.Body, &p)
	if outs := t.checkSession(m.Ref, p.SessionID); outs != nil {
		return outs
	}
	return t.requestModel(m, p.ModelID)
}

func (t *translator) requestModel(m translate.Msg, model string) []translate.Out {
	if !slices.ContainsFunc(t.models, func(mi modelInfo) bool { return mi.Value == model }) {
		return []translate.Out{failf(m.Ref, translate.CodeInvalidParams, "unknown model %q: choose one of the model option's values", model)}
	}
	// "default" resets the CLI to its own choice: set_model without a
	// model, as the SDKs send it.
	req := struct {
		Subtype string `json:"subtype"`
		Model   string `json:"model,omitempty"`
	}{Subtype: "set_model"}
	if model != "default" {
		req.Model = model
	}
	return []translate.Out{t.controlRequest(&ctlRequest{kind: ctlSetModel, ref: m.Ref, method: m.Method, value: model}, req)}
}

// controlAnswered handles the CLI's answer to one of the translator's
// control requests.
func (t *translator) controlAnswered(c *ctlRequest, response json.RawMessage, errText string) []translate.Out {
	switch c.kind {
	case ctlInitialize:
		return t.opened(response, errText)
	case ctlInterrupt:
		// The turn's result ends it; an error (nothing running) changes
		// nothing.
		return nil
	case ctlSetMode, ctlSetModel:
		what := "permission mode"
		if c.kind == ctlSetModel {
			what = "model"
		}
		if errText != "" {
			if c.ref == 0 {
				return nil
			}
			return []translate.Out{failf(c.ref, translate.CodeInternalError, "Claude Code did not switch the %s to %q: %s", what, c.value, errText)}
		}
		var outs []translate.Out
		if c.kind == ctlSetMode {
			t.mode = c.value
		} else {
			t.model = c.value
		}
		// Keep the other view in sync, before the answer as
		// claude-agent-acp does: modes and config options both show the
		// mode (ACP spec, Session Config Options).
		if c.kind == ctlSetMode && c.method != "session/set_mode" {
			outs = append(outs, t.modeUpdate())
		}
		if c.method != "session/set_config_option" {
			outs = append(outs, t.configUpdate())
		}
		if c.ref != 0 {
			switch c.method {
			case "session/set_config_option":
				outs = append(outs, reply(c.ref, struct {
					ConfigOptions []configOption `json:"configOptions"`
				}{t.configOptions()}))
			default:
				outs = append(outs, reply(c.ref, struct{}{}))
			}
		}
		return outs
	}
	return nil
}

func (t *translator) modeUpdate() translate.Out {
	return t.update(struct {
		SessionUpdate string `json:"sessionUpdate"`
		CurrentModeID string `json:"currentModeId"`
	}{"current_mode_update", t.mode})
}

func (t *translator) configUpdate() translate.Out {
	return t.update(struct {
		SessionUpdate string         `json:"sessionUpdate"`
		ConfigOptions []configOption `json:"configOptions"`
	}{"config_option_update", t.configOptions()})
}
