package agent2026

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/actgate/actgate/internal/mcpproxy/stateless"
	"github.com/actgate/actgate/internal/mcpproxy/wire"
)

// maxLearntTools bounds the tools whose x-mcp-header mappings the proxy keeps;
// maxToolHeaders the headers one tool may declare, and maxHeaderDepth how deep in the
// inputSchema's properties a declaration is read. A tool beyond a bound is not known: a call
// of it that carries Mcp-Param headers is refused.
const (
	maxLearntTools  = 4096
	maxLearnPages   = 16
	minLearnSpacing = time.Second

	// memberMeta is the params member of a request's metadata.
	memberMeta = "_meta"
)

// learnParamHeaders records, from an upstream's tools/list result, which argument each tool's
// Mcp-Param-* headers copy (stateless.ToolHeaders). A tool listed is known from then on, with the headers
// it declares (none included); pages add to what is known; a tool listed again is replaced;
// one whose declarations the gate cannot hold is forgotten.
func (p *Handler) learnParamHeaders(result json.RawMessage) {
	var list struct {
		Tools []struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties stateless.SchemaProps `json:"properties"`
			} `json:"inputSchema"`
		} `json:"tools"`
	}
	if json.Unmarshal(result, &list) != nil {
		return
	}
	p.sl.mu.Lock()
	defer p.sl.mu.Unlock()
	for _, t := range list.Tools {
		if t.Name == "" {
			continue
		}
		m, ok := stateless.ToolHeaders(t.InputSchema.Properties)
		_, known := p.sl.paramHeaders[t.Name]
		if !ok {
			delete(p.sl.paramHeaders, t.Name)
			continue
		}
		if !known && len(p.sl.paramHeaders) >= maxLearntTools {
			continue
		}
		if p.sl.paramHeaders == nil {
			p.sl.paramHeaders = map[string]map[string][]string{}
		}
		p.sl.paramHeaders[t.Name] = m
	}
}

// paramsUnmapped reports whether a tools/call carries an Mcp-Param header the proxy cannot tie
// to an argument: its tool is not known, or does not declare that header.
func (p *Handler) paramsUnmapped(h http.Header, sr *stateless.Request) bool {
	names := stateless.ParamHeaderNames(h)
	if len(names) == 0 {
		return false
	}
	_, err := p.declaredParams(sr.Name, names)
	return err != nil
}

// declaredParams is the x-mcp-header mapping the proxy learnt for tool (nil when it does not
// know the tool), and the refusal of the first of the request's Mcp-Param headers (names) it
// cannot tie to an argument: any, of a tool it does not know; one the tool does not declare.
func (p *Handler) declaredParams(tool string, names []string) (map[string][]string, *stateless.Error) {
	p.sl.mu.Lock()
	m, known := p.sl.paramHeaders[tool]
	p.sl.mu.Unlock()
	if !known && len(names) > 0 {
		return nil, stateless.HeaderMismatch("the gate does not know which arguments the Mcp-Param headers of tool %q copy (its tools/list does not declare it)",
			wire.Clip(tool, 64))
	}
	for _, k := range names {
		if _, ok := m[k]; !ok {
			return m, stateless.HeaderMismatch("the %s header is not one the tool declares (x-mcp-header)", wire.Clip(k, 64))
		}
	}
	return m, nil
}

// learnTools lists the upstream's tools (every page, at most maxLearnPages) to learn their
// x-mcp-header declarations, for a tools/call whose Mcp-Param headers the proxy cannot tie to
// an argument yet (a fresh gate, or a tool whose list changed): the check needs the tool's
// declaration before anything is forwarded. One listing at a time, at most one per
// minLearnSpacing; on the agent's upstream session of a stateful upstream (the capabilities its
// request declares). A listing that fails leaves the tool unknown, and the call is refused.
func (p *Handler) learnTools(mode upstreamMode, agent string, sr *stateless.Request) {
	p.sl.learn.Lock()
	defer p.sl.learn.Unlock()
	if !p.sl.learnedAt.IsZero() && time.Since(p.sl.learnedAt) < minLearnSpacing {
		return
	}
	p.sl.learnedAt = time.Now()
	var meta map[string]json.RawMessage
	_ = json.Unmarshal(sr.Params[memberMeta], &meta)
	own := map[string]json.RawMessage{}
	for _, k := range []string{wire.MetaProtocolVersion, wire.MetaClientCapabilities} {
		if v, ok := meta[k]; ok {
			own[k] = v
		}
	}
	// Not the agent's request: nothing of the listing goes to the agent's answer stream (a
	// context of its own), and it is bounded by ConnectTimeout.
	lctx, cancel := context.WithTimeout(context.Background(), p.cfg.ConnectTimeout)
	defer cancel()
	cursor := ""
	for page := 0; page < maxLearnPages; page++ {
		params := map[string]any{memberMeta: own}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := wire.MarshalNoEscape(params)
		if err != nil {
			return
		}
		lr := &stateless.Request{Req: &jsonrpc.Request{Method: wire.MethodListTools, Params: raw}, Version: sr.Version,
			Params: map[string]json.RawMessage{memberMeta: wire.JSONOrEmpty(own)}}
		resp, _, err := p.statelessSend(lctx, mode, agent, statelessHeaders(http.Header{}, lr, false), lr, raw, true)
		if err != nil || resp == nil || resp.Error != nil {
			p.log.Info("Upstream tools/list for the tools' Mcp-Param headers failed; the call's headers are refused")
			return
		}
		p.learnParamHeaders(resp.Result)
		var next struct {
			NextCursor string `json:"nextCursor"`
		}
		if json.Unmarshal(resp.Result, &next) != nil || next.NextCursor == "" {
			return
		}
		cursor = next.NextCursor
	}
}

// checkDeclaredParams ties each Mcp-Param-* header of a tools/call to the argument it copies
// (the tool's x-mcp-header declarations, learnt from the upstream's tools/list, learnTools):
// a header of a tool the proxy does not know, or one the tool does not declare, is refused (the
// gate cannot say what it copies); each declared argument the call carries (a string, number
// or boolean) must come with its header, once, copying exactly that argument; and no declared
// header may come without its argument. The gate decides on the arguments, and a server or
// intermediary that routes on a header must see the same value. A 2025 upstream never sees the
// headers; the check is the same for both revisions.
func (p *Handler) checkDeclaredParams(h http.Header, sr *stateless.Request) *stateless.Error {
	m, err := p.declaredParams(sr.Name, stateless.ParamHeaderNames(h))
	if err != nil || m == nil {
		return err
	}
	var args map[string]json.RawMessage
	_ = json.Unmarshal(sr.Params["arguments"], &args)
	for header, path := range m {
		vs := h.Values(header)
		arg := strings.Join(path, ".")
		want, ok := stateless.HeaderForm(stateless.LookupPath(args, path))
		switch {
		case !ok && len(vs) == 0:
			continue
		case !ok:
			return stateless.HeaderMismatch("the %s header copies no argument of the call", wire.Clip(header, 64))
		case len(vs) != 1:
			return stateless.HeaderMismatch("the %s header must appear once with the call's %q argument", wire.Clip(header, 64), wire.Clip(arg, 64))
		}
		got, valid := stateless.DecodeHeader(strings.TrimSpace(vs[0]))
		if !valid || !want[got] {
			return stateless.HeaderMismatch("the %s header does not match the call's %q argument", wire.Clip(header, 64), wire.Clip(arg, 64))
		}
	}
	return nil
}
