package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/actgate/actgate/api/v1alpha1"
)

// MaxFileBytes bounds a policy file.
const MaxFileBytes = 1 << 20

// ErrPolicyFile is matched (errors.Is) by every error of LoadFile and ParseSpec about the file's
// content (not about opening it).
var ErrPolicyFile = errors.New("policy: invalid policy file")

// LoadFile reads the standalone gate's policy file: YAML (or JSON, which is YAML) holding either
// a ToolPolicySpec or a whole ToolPolicy object (apiVersion actgate's v1alpha1, kind
// ToolPolicy), whose spec is returned. See ParseSpec for what is refused. The spec is not
// compiled: pass it to Compile.
func LoadFile(path string) (*v1alpha1.ToolPolicySpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	spec, err := ParseSpec(data)
	if err != nil {
		return nil, fmt.Errorf("policy file %s: %w", path, err)
	}
	return spec, nil
}

// ParseSpec decodes a policy document strictly. It refuses, rather than resolves:
//   - more than MaxFileBytes, an empty document, more than one YAML document;
//   - duplicate keys (YAML forbids them; sigs.k8s.io/yaml's strict conversion);
//   - unknown fields, and field names that differ from the API's only in case — encoding/json,
//     which sigs.k8s.io/yaml.UnmarshalStrict decodes with, matches names case-insensitively, so
//     "Servers" beside "servers" would be resolved silently; sigs.k8s.io/json (the API
//     machinery's own strict decoder) is case-sensitive;
//   - an apiVersion or kind other than ToolPolicy's when the document is a whole object.
func ParseSpec(data []byte) (*v1alpha1.ToolPolicySpec, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrPolicyFile, MaxFileBytes)
	}
	if err := singleDocument(data); err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrPolicyFile, oneLine(err.Error()))
	}
	j = bytes.TrimSpace(j)
	if len(j) == 0 || j[0] != '{' {
		return nil, fmt.Errorf("%w: the document is not a mapping", ErrPolicyFile)
	}

	var probe struct {
		APIVersion *string `json:"apiVersion"`
		Kind       *string `json:"kind"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(j, &probe); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrPolicyFile, oneLine(err.Error()))
	}
	if probe.APIVersion == nil && probe.Kind == nil {
		var spec v1alpha1.ToolPolicySpec
		if err := strictDecode(j, &spec); err != nil {
			return nil, err
		}
		return &spec, nil
	}
	var obj v1alpha1.ToolPolicy
	if err := strictDecode(j, &obj); err != nil {
		return nil, err
	}
	if want := v1alpha1.GroupVersion.String(); obj.APIVersion != want || obj.Kind != "ToolPolicy" {
		return nil, fmt.Errorf("%w: apiVersion/kind must be %s/ToolPolicy", ErrPolicyFile, want)
	}
	return &obj.Spec, nil
}

func strictDecode(j []byte, into any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(j, into)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrPolicyFile, oneLine(err.Error()))
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = oneLine(e.Error())
		}
		return fmt.Errorf("%w: %s", ErrPolicyFile, strings.Join(msgs, "; "))
	}
	return nil
}

// singleDocument refuses an empty stream and a stream of more than one YAML document: the YAML
// decoder behind sigs.k8s.io/yaml reads the first document and silently drops the rest.
func singleDocument(data []byte) error {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var first yamlv3.Node
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%w: empty document", ErrPolicyFile)
		}
		return fmt.Errorf("%w: %s", ErrPolicyFile, oneLine(err.Error()))
	}
	var next yamlv3.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return fmt.Errorf("%w: %s", ErrPolicyFile, oneLine(err.Error()))
	}
	return fmt.Errorf("%w: more than one YAML document", ErrPolicyFile)
}
