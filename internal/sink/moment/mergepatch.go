package moment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// errPatch is returned for a merge patch or target that is not a JSON object.
var errPatch = errors.New("sink: merge patch needs a JSON object target and patch")

// MergePatch applies an RFC 7396 JSON merge patch to a JSON object and returns the result
// (not canonicalized). A member of the patch whose value is null removes that member; an object
// value is merged recursively; any other value replaces. Numbers keep their text (json.Number),
// so no precision is lost on the way to the canonicalizer. The authority service builds its
// gate-authored envelopes with it too.
func MergePatch(target, patch json.RawMessage) (json.RawMessage, error) {
	t, err := decodeObject(target)
	if err != nil {
		return nil, fmt.Errorf("%w: target: %v", errPatch, err)
	}
	p, err := decodeObject(patch)
	if err != nil {
		return nil, fmt.Errorf("%w: patch: %v", errPatch, err)
	}
	out, err := json.Marshal(mergeValue(t, p))
	if err != nil {
		return nil, err
	}
	return out, nil
}

func decodeObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("not an object")
	}
	return m, nil
}

// mergeValue is MergePatch(Target, Patch) of RFC 7396 §2.
func mergeValue(target any, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	tm, ok := target.(map[string]any)
	if !ok {
		tm = map[string]any{}
	}
	out := make(map[string]any, len(tm)+len(pm))
	for k, v := range tm {
		out[k] = v
	}
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergeValue(out[k], v)
	}
	return out
}
