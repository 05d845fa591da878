// Package moment holds the binding moments of the finality sink (internal/sink): what a
// registered moment is (Moment, its options and the grants a resolution issues), the table
// that keeps moments, grants, declines and undelivered resolutions with the pending-moment
// limits (Table), a moment's stored record and its strict decoding (Stored, Decode), the
// quorum of principals decided with the AEB evidence chain (Quorum), and the agent's
// request_binding_moment proposal and its parsing (Proposal, ParseProposal).
//
// The flow around them (escalating a call, registering a proposed moment, applying a
// principal's resolution, issuing the grant's authority) is the gate's, in internal/sink
// (docs/architecture.md "Binding moments"). This package imports nothing of the sink.
//
// Invariants:
//
//   - A Moment's Mu is held while its resolution changes (Lock order: Moment.Mu before the
//     Table's own lock).
//   - Decode recomputes every digest from the record's own arguments and refuses a record whose
//     options are not its envelope's (ErrRecord): a damaged record cannot authorise another call.
//   - ParseProposal reads untrusted bytes through the strict JCS profile first and refuses
//     anything but the members of ProposalSchema (ErrProposal).
package moment
