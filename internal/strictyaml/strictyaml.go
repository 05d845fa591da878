package strictyaml

import (
	"bytes"
	"errors"
	"io"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// MappingJSON returns the JSON form of data, which must hold exactly one YAML document, without
// duplicate keys, whose top level is a mapping.
func MappingJSON(data []byte) ([]byte, error) {
	if err := singleDocument(data); err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, err
	}
	j = bytes.TrimSpace(j)
	if len(j) == 0 || j[0] != '{' {
		return nil, errors.New("the document is not a mapping")
	}
	return j, nil
}

// Unmarshal decodes the JSON j into into, refusing unknown fields and case-differing names;
// every strict-decoding problem is reported, joined by "; ".
func Unmarshal(j []byte, into any) error {
	strictErrs, err := sigsjson.UnmarshalStrict(j, into)
	if err != nil {
		return err
	}
	if len(strictErrs) > 0 {
		msgs := make([]string, len(strictErrs))
		for i, e := range strictErrs {
			msgs[i] = e.Error()
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

// singleDocument refuses an empty stream and a stream of more than one YAML document.
func singleDocument(data []byte) error {
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	var first yamlv3.Node
	if err := dec.Decode(&first); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty document")
		}
		return err
	}
	var next yamlv3.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return nil
	case err != nil:
		return err
	}
	return errors.New("more than one YAML document")
}
