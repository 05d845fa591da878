// Package logfield bounds the values a log line takes from outside the process (an agent's
// tool name, a method, an id): a value longer than MaxBytes, or one holding control, line-break
// or bidi-override characters or invalid UTF-8, is logged as a short prefix with those
// characters replaced, followed by a marker that gives its length and its SHA-256 digest, so a
// log line stays one bounded line and the full value can still be matched against the journal
// or receipts.
package logfield
