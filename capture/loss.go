package capture

import (
	"context"
	"errors"
)

// writeFailed accounts for a store write that failed, wholly or in part
// (a *PartialWriteError): the messages not stored count as lost, their
// sessions are marked incomplete on the next write, the failure is logged
// once per run of failures, and what was stored still reaches OnBatch.
func (r *Recorder) writeFailed(b *Batch, err error) {
	r.storeErrors.Add(1)
	msg := err.Error()
	r.lastErr.Store(&msg)
	refused := b
	var pe *PartialWriteError
	if errors.As(err, &pe) && pe.Refused != nil {
		refused = pe.Refused
	}
	// Refused messages from a spool are not lost: the spool keeps them,
	// and they are counted again when its ingester tries again.
	retried, all := 0, refused
	if len(b.foreign) > 0 {
		kept := refused.Messages[:0:0]
		for _, m := range refused.Messages {
			if _, ok := b.foreign[m]; ok {
				retried++
				continue
			}
			kept = append(kept, m)
		}
		refused = &Batch{Sessions: refused.Sessions, Exchanges: refused.Exchanges, Messages: kept}
		r.messages.Add(-int64(retried))
	}
	lost := int64(len(refused.Messages))
	r.lost.Add(lost)
	r.stored.Add(int64(len(b.Messages)) - lost - int64(retried))
	if !r.failing.Swap(true) {
		r.log.Error("store write failed; traffic still flows but is not recorded",
			LogKeyError, err, LogKeyLost, lost)
	}
	r.noteLoss(refused, err)
	if (refused != b || retried > 0) && r.opts.OnBatch != nil {
		if stored := storedPart(b, all); stored.Len() > 0 {
			r.opts.OnBatch(stored)
		}
	}
	for _, c := range b.syncs {
		close(c)
	}
}

// storedPart is b without the records of refused.
func storedPart(b, refused *Batch) *Batch {
	out := &Batch{}
	out.Sessions = without(b.Sessions, refused.Sessions)
	out.Exchanges = without(b.Exchanges, refused.Exchanges)
	out.Messages = without(b.Messages, refused.Messages)
	return out
}

func without[T any](all, drop []*T) []*T {
	if len(drop) == 0 {
		return all
	}
	gone := make(map[*T]bool, len(drop))
	for _, p := range drop {
		gone[p] = true
	}
	var out []*T
	for _, p := range all {
		if !gone[p] {
			out = append(out, p)
		}
	}
	return out
}

// lossReason is the reason a session's records were lost, as its
// LossReason shows it: a store's own words when it refused them for
// space, else the failure.
func lossReason(err error) string {
	var pe *PartialWriteError
	if errors.As(err, &pe) && pe.Err != nil {
		err = pe.Err
	}
	if errors.Is(err, ErrStoreFull) {
		return err.Error()
	}
	return "store write failed: " + err.Error()
}

// markFinalLoss marks the sessions that lost records in the last writes,
// those after the pipeline ended (while it runs, its next write marks
// them): their records are written once more, incomplete. Without it a
// session whose last messages were refused as the recorder closed was
// stored closed, its loss nowhere but in the log.
func (r *Recorder) markFinalLoss(ctx context.Context) {
	loss := r.takeLoss()
	if len(loss) == 0 {
		return
	}
	b := &Batch{}
	for id, l := range loss {
		// The pipeline has ended (it closed r.batches): its sessions
		// are the writer's to read now.
		st := r.pipe.groups.sessions[id]
		if st == nil {
			continue
		}
		st.s.Status = StatusIncomplete
		st.s.Lost += l.n
		st.s.LossReason = l.reason
		s := st.s
		b.Sessions = append(b.Sessions, &s)
	}
	if len(b.Sessions) == 0 {
		return
	}
	if err := r.store.Write(ctx, b); err != nil {
		r.log.Error("marking the sessions that lost records as incomplete failed", LogKeyError, err)
	}
}
