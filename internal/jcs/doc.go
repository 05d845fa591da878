// Package jcs implements the JSON Canonicalization Scheme (RFC 8785) over raw
// JSON text, plus the strict profile of binding-moment-envelope-04 §6.3
// (= EP receipts §13.12).
//
// The input is parsed by this package's own single-pass tokenizer on the raw
// bytes, never via encoding/json, so duplicate member names, unpaired
// surrogates and out-of-profile numbers are detected before anything is
// decoded or normalised away.
package jcs
