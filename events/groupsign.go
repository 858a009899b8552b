package events

// Group signing: the appends of one process that are ready to be signed with the same
// key at the same moment share one batch signature (batchsign.go) instead of one
// ed25519 signature each, through a group-commit queue (pkg/groupcommit). Nothing waits
// to gather a batch: a caller that finds nobody signing signs its event at once, alone,
// with Sign's plain signature; only callers that arrive while someone is signing queue,
// and when that signature is done the first of them signs every event queued by then
// (up to batchLeaves) with one signature and releases the rest. So a lone append costs
// what it did, and under load one signature serves as many appends as arrive during
// one signature's time.
//
// What a batch signature vouches for is exactly each member's signing bytes as sealed
// (its chain link included), as a single signature does. A member whose append is then
// refused (a conflict) never reaches the log; its leaf is only a hash inside its
// batch-mates' paths and proves nothing about any stored event. The store seals a
// decision made again after a conflict anew (a new chain link: new signing bytes, a new
// signature), so no stored event carries a signature made for another event.

// signJob is one event queued to be signed, and whether it was.
type signJob struct {
	e      *Event
	signed bool
}

// signShared sets e's signer and signature as Sign does, sharing a batch signature
// with the events of other callers that are ready to be signed at the same moment.
// e must be complete, as for Sign.
func (k *SigningKey) signShared(e *Event) {
	j := &signJob{e: e}
	k.group.Do(j, batchLeaves, k.signJobs)
	if !j.signed {
		// The caller that signed for this event failed half-way (it panicked, and goes
		// on panicking): appending the event unsigned would put a hole in the log's trust.
		panic("events: the shared signature for event " + e.ID + " was never made")
	}
}

// signJobs signs the batch's events with one signature (one alone: Sign's).
func (k *SigningKey) signJobs(batch []*signJob) {
	if len(batch) == 1 {
		k.Sign(batch[0].e)
		batch[0].signed = true
		return
	}
	evs := make([]Event, len(batch))
	for i, j := range batch {
		evs[i] = *j.e
	}
	k.signBatch(evs)
	for i, j := range batch {
		j.e.Signer, j.e.Signature, j.signed = evs[i].Signer, evs[i].Signature, true
	}
}
