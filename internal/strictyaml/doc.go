// Package strictyaml decodes one YAML document strictly, through its JSON form, into a Go value:
// the one decoding pipeline of actgate's configuration files (the standalone gate's config,
// internal/gateconfig, and the policy file, internal/policy). It refuses rather than resolves:
// an empty stream, more than one document (sigs.k8s.io/yaml reads the first and silently drops
// the rest), duplicate keys, a document that is not a mapping, unknown fields, and field names
// that differ from the Go value's only in case (sigs.k8s.io/json is case-sensitive where
// encoding/json is not).
//
// Errors carry no sentinel and may span lines: callers wrap them with their own and flatten
// them for their messages.
package strictyaml
