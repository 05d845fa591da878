// Package jcs canonicalizes JSON text per the JSON Canonicalization Scheme
// (RFC 8785) and digests it as binding-moment-envelope-04 §6.2 requires
// ("sha256:" + 64 lowercase hex), with the strict profile of envelope-04
// §6.3 (= EP receipts §13.12) as a mode.
//
// Input is read by this package's own single-pass tokenizer over the raw
// bytes, never through encoding/json, which keeps the last of two duplicate
// names and turns a lone surrogate into U+FFFD: both would be silent
// normalisation, and §6.3 requires rejection "at the parse boundary".
//
// # Modes
//
// Both modes reject, with the same code:
//   - anything that is not one JSON text (RFC 8259): JCS_SYNTAX, including a
//     leading byte order mark, trailing data and empty input;
//   - ill-formed UTF-8: JCS_INVALID_UTF8;
//   - member names equal after escape decoding: JCS_DUPLICATE_MEMBER;
//   - a surrogate without its pair, whether a \u escape or the UTF-8
//     encoding of a surrogate code point: JCS_UNPAIRED_SURROGATE.
//
// The last two are rejected in Full mode too because RFC 8785 §3.1 is
// defined over I-JSON (RFC 7493), which forbids both; keeping them out of
// Full means the modes differ only in numbers and depth.
//
// Strict additionally rejects numbers that are not integers of magnitude at
// most 2^53-1 (JCS_NUMBER_OUT_OF_PROFILE; judged on the token's exact
// decimal value, so 1.0, 1e0 and -0 are accepted as 1, 1 and 0) and nesting
// deeper than MaxDepth = 64 containers, the root counting as one
// (JCS_DEPTH_EXCEEDED). Full serialises any finite number as ECMAScript
// does (RFC 8785 §3.2.2.3), rejects numbers that overflow a double
// (JCS_NUMBER_NOT_FINITE), and bounds nesting at MaxDepthFull = 1000, a
// limit RFC 8785 does not have, to keep work and stack bounded on hostile
// input. Whatever Strict accepts, Full accepts with identical bytes.
//
// A scalar root ("x", 1, true) is accepted: RFC 8785 canonicalizes any
// JSON value. Every rejection is an *Error with a byte offset into the
// input; no input makes Canonicalize panic.
package jcs
