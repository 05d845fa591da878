package policy

import (
	"errors"
	"fmt"
	"io"
	"os"

	sigsjson "sigs.k8s.io/json"

	"github.com/actgate/actgate/api/v1alpha1"
	"github.com/actgate/actgate/internal/strictyaml"
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
	j, err := strictyaml.MappingJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrPolicyFile, oneLine(err.Error()))
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
	if err := strictyaml.Unmarshal(j, into); err != nil {
		return fmt.Errorf("%w: %s", ErrPolicyFile, oneLine(err.Error()))
	}
	return nil
}
