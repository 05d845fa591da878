package strictyaml

import (
	"strings"
	"testing"
)

type target struct {
	Name  string `json:"name"`
	Count int    `json:"count,omitempty"`
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"mapping", "name: a\ncount: 2\n", ""},
		{"json is yaml", `{"name":"a"}`, ""},
		{"empty", "", "empty document"},
		{"two documents", "name: a\n---\nname: b\n", "more than one YAML document"},
		{"not a mapping", "- a\n- b\n", "the document is not a mapping"},
		{"scalar", "a", "the document is not a mapping"},
		{"duplicate key", "name: a\nname: b\n", "already set"},
		{"unknown field", "name: a\nextra: 1\n", "unknown field"},
		{"case-differing name", "Name: a\n", "unknown field"},
		{"syntax", "name: [a\n", "yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v target
			j, err := MappingJSON([]byte(tc.in))
			if err == nil {
				err = Unmarshal(j, &v)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			case tc.wantErr == "" && v.Name != "a":
				t.Fatalf("decoded %+v", v)
			}
		})
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range []string{"name: a\n", "", "a: 1\n---\nb: 2\n", "- x\n", "name: a\nname: b\n", `{"name":"a","count":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := MappingJSON(data)
		if err != nil {
			return
		}
		if len(j) == 0 || j[0] != '{' {
			t.Fatalf("MappingJSON returned a non-mapping: %q", j)
		}
		var v target
		_ = Unmarshal(j, &v)
	})
}
