package stateless

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/ef"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// MaxListensPerAgent bounds the listens one agent holds open on one proxy (each is an open
// agent stream and, relayed, an upstream request; served, a share of an upstream GET stream).
const MaxListensPerAgent = 16

// MaxListenURIs bounds the resources one listen names; MaxListenURI one URI's length.
const MaxListenURIs = 64

const MaxListenURI = 2048

// ListenFilter is a subscriptions/listen notification filter: the list changes and the
// resources it asks for.
type ListenFilter struct {
	Tools, Prompts, Resources bool
	URIs                      []string
}

// Empty reports whether the filter asks for nothing.
func (f ListenFilter) Empty() bool {
	return !f.Tools && !f.Prompts && !f.Resources && len(f.URIs) == 0
}

// Accepts reports whether the filter takes a change notification of method (uri: the
// resources/updated notification's params.uri).
func (f ListenFilter) Accepts(method, uri string) bool {
	switch method {
	case wire.NotifyToolsChanged:
		return f.Tools
	case wire.NotifyPromptsChanged:
		return f.Prompts
	case wire.NotifyResourcesChanged:
		return f.Resources
	case wire.NotifyResourceUpdated:
		for _, u := range f.URIs {
			if u == uri {
				return true
			}
		}
	}
	return false
}

// MarshalJSON writes the filter as the revision does: only the members it asks for.
func (f ListenFilter) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if f.Tools {
		m["toolsListChanged"] = true
	}
	if f.Prompts {
		m["promptsListChanged"] = true
	}
	if f.Resources {
		m["resourcesListChanged"] = true
	}
	if len(f.URIs) > 0 {
		m["resourceSubscriptions"] = f.URIs
	}
	return wire.MarshalNoEscape(m)
}

// IsChangeNotification reports whether method is one of the notifications 2026-07-28 delivers
// only on a listen stream.
func IsChangeNotification(method string) bool {
	switch method {
	case wire.NotifyToolsChanged, wire.NotifyPromptsChanged, wire.NotifyResourcesChanged, wire.NotifyResourceUpdated:
		return true
	}
	return false
}

// ListenRefusal is a JSON-RPC error of a listen that is not opened, with its EF code in data.
func ListenRefusal(code int64, efc ef.EFCode, msg string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{wire.MetaEFCode: string(efc)})
	return &jsonrpc.Error{Code: code, Message: "actgate: " + msg, Data: data}
}

// ListenLimitErr refuses a listen beyond MaxListensPerAgent (-32603, as the TypeScript SDK's
// server answers its own subscription limit).
func ListenLimitErr() *jsonrpc.Error {
	return ListenRefusal(wire.CodeInternalError, ef.EFListenLimit,
		fmt.Sprintf("subscription limit reached: %d listens of this agent are open", MaxListensPerAgent))
}

// ParseListen reads a subscriptions/listen's params (the members of a well-formed 2026-07-28
// request, Parse): notifications is required and an object; its toolsListChanged,
// promptsListChanged and resourcesListChanged are booleans where present; its
// resourceSubscriptions an array of at most MaxListenURIs non-empty strings of at most
// MaxListenURI bytes (a repeated one counted once). Other members are ignored, as the
// revision's schema ignores them. A malformed filter is refused with -32602 and
// EF_LISTEN_INVALID, one beyond the bounds with -32602 and EF_LISTEN_LIMIT.
func ParseListen(params map[string]json.RawMessage) (ListenFilter, *jsonrpc.Error) {
	var f ListenFilter
	invalid := func(msg string) (ListenFilter, *jsonrpc.Error) {
		return ListenFilter{}, ListenRefusal(wire.CodeInvalidParams, ef.EFListenInvalid, "subscriptions/listen: "+msg)
	}
	raw, ok := params["notifications"]
	if !ok || !IsJSONObject(raw) {
		return invalid("params.notifications is required and must be an object")
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return invalid("params.notifications must be an object")
	}
	for name, dst := range map[string]*bool{"toolsListChanged": &f.Tools, "promptsListChanged": &f.Prompts, "resourcesListChanged": &f.Resources} {
		v, ok := members[name]
		if !ok {
			continue
		}
		switch string(bytes.TrimSpace(v)) {
		case "true":
			*dst = true
		case "false":
		default:
			return invalid("params.notifications." + name + " must be a boolean")
		}
	}
	v, ok := members["resourceSubscriptions"]
	if !ok {
		return f, nil
	}
	v = bytes.TrimSpace(v)
	if len(v) == 0 || v[0] != '[' {
		return invalid("params.notifications.resourceSubscriptions must be an array of strings")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(v, &items); err != nil {
		return invalid("params.notifications.resourceSubscriptions must be an array of strings")
	}
	if len(items) > MaxListenURIs {
		return ListenFilter{}, ListenRefusal(wire.CodeInvalidParams, ef.EFListenLimit,
			fmt.Sprintf("subscriptions/listen: at most %d resources per listen", MaxListenURIs))
	}
	seen := map[string]bool{}
	for _, it := range items {
		it = bytes.TrimSpace(it)
		var uri string
		if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &uri) != nil || uri == "" {
			return invalid("params.notifications.resourceSubscriptions must hold non-empty strings")
		}
		if len(uri) > MaxListenURI {
			return ListenFilter{}, ListenRefusal(wire.CodeInvalidParams, ef.EFListenLimit,
				fmt.Sprintf("subscriptions/listen: a resource URI is longer than %d bytes", MaxListenURI))
		}
		if !seen[uri] {
			seen[uri] = true
			f.URIs = append(f.URIs, uri)
		}
	}
	return f, nil
}

// HonoredFilter is the part of want the upstream can deliver, by the capabilities of its
// initialize result: a list change where it declares listChanged, resources where it declares
// resources.subscribe.
func HonoredFilter(want ListenFilter, init json.RawMessage) ListenFilter {
	var r struct {
		Capabilities struct {
			Tools *struct {
				ListChanged bool `json:"listChanged"`
			} `json:"tools"`
			Prompts *struct {
				ListChanged bool `json:"listChanged"`
			} `json:"prompts"`
			Resources *struct {
				ListChanged bool `json:"listChanged"`
				Subscribe   bool `json:"subscribe"`
			} `json:"resources"`
		} `json:"capabilities"`
	}
	_ = json.Unmarshal(init, &r)
	c := r.Capabilities
	out := ListenFilter{
		Tools:     want.Tools && c.Tools != nil && c.Tools.ListChanged,
		Prompts:   want.Prompts && c.Prompts != nil && c.Prompts.ListChanged,
		Resources: want.Resources && c.Resources != nil && c.Resources.ListChanged,
	}
	if c.Resources != nil && c.Resources.Subscribe {
		out.URIs = append([]string(nil), want.URIs...)
	}
	return out
}

// StampSubscription returns a notification's params with the listen's id in
// _meta["io.modelcontextprotocol/subscriptionId"], every other member as written (absent
// params become an object holding only _meta); false for params or a _meta that are not
// objects.
func StampSubscription(params json.RawMessage, id json.RawMessage) (json.RawMessage, bool) {
	m := map[string]json.RawMessage{}
	if p := bytes.TrimSpace(params); len(p) > 0 && !bytes.Equal(p, []byte("null")) {
		if p[0] != '{' || json.Unmarshal(p, &m) != nil {
			return nil, false
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := m["_meta"]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if !IsJSONObject(raw) || json.Unmarshal(raw, &meta) != nil {
			return nil, false
		}
	}
	meta[wire.MetaSubscriptionID] = id
	mraw, err := wire.MarshalNoEscape(meta)
	if err != nil {
		return nil, false
	}
	m["_meta"] = bytes.TrimSpace(mraw)
	out, err := wire.MarshalNoEscape(m)
	if err != nil {
		return nil, false
	}
	return bytes.TrimSpace(out), true
}
