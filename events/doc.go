// Package events owns gridwire's wire: the event names and their CloudEvents types, the
// subjects of the JOBS stream, the payloads, the canonical Job, the pure state fold, the
// one decoder of stored events (which brings older schema versions to the current one
// through Upcasters), and the event store that appends with optimistic concurrency, loads
// and replays. Recorded histories under testdata/replay hold the fold to what it did.
//
// No other package writes a subject string literal or imports the CloudEvents SDK. The
// package does not decide what a service does with an event: services fold a job's
// history with Replay and choose their own action.
package events
