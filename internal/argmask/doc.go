// Package argmask masks tool-argument values at RFC 6901 JSON Pointers for a principal's
// surface.
//
// A ToolPolicy rule may name argument paths whose values a principal's surface shows masked
// (spec.rules[].maskArguments): a card number, a patient identifier. Masking changes only what is
// shown. The option's action_digest is computed by the gate over the unmasked call, so the
// authority a resolution issues still binds every masked value; a surface that receives a masked
// call cannot recompute that digest and says so.
//
// Pointers are validated with Parse (policy compilation refuses a bad one) and applied with
// Apply to a canonical argument object.
package argmask
