// Package storetest is the conformance suite every [capture.Store] backend
// passes. A backend's test calls [Run] (or [RunWithOptions] for a
// persistent backend) with a function that opens a fresh, empty store:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) capture.Store {
//			s := memstore.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// # What the suite pins down
//
// Beyond the [capture.Store] documentation, the suite fixes these points,
// which every backend must share:
//
//   - Records round-trip field for field; raw bytes (Raw, ID, capabilities,
//     SSE prefix and suffix) byte for byte. Empty and nil slices and maps
//     are interchangeable; times compare with [time.Time.Equal].
//   - Sessions with equal Start are ordered by ID, larger first (IDs are
//     time-ordered, so that is still newest first).
//   - Exchanges and Messages of a session with no session record, or no
//     records at all, yield nothing and no error.
//   - Message.Size is stored as given, and kept when NoRaw leaves Raw nil.
//   - LastIDs are high-water marks: deleting the session that holds the
//     highest Seq or exchange ID does not lower them, so a recorder never
//     hands an ID out twice.
//   - DeleteSession of a missing session changes nothing.
//   - A cancelled context fails every method with the context's error; Write
//     then stores nothing.
//   - An iterator checks its context before each record and, on
//     cancellation, yields (nil, ctx.Err()) once and stops. After Close it
//     yields (nil, [capture.ErrClosed]) once.
//   - An iteration sees the store as it was when the iteration began, even
//     if the loop body writes.
//   - Records passed to Write and records returned by reads do not alias the
//     store: changing them afterwards changes nothing stored.
//
// # Editing
//
// A store that implements [capture.Editor] also runs the Editor tests:
// versions numbered from 1 with the recorded bytes as version 0, reads
// that return the latest version (Size and Edited with it, NoRaw
// included), refusals (invalid JSON, empty labels, missing records),
// edits and labels that survive the recorder rewriting the message and
// session records, deletes that take them along, edits of several MiB,
// concurrent edits that get distinct versions, and, with Reopen, that
// they persist.
//
// # Parallelism
//
// Subtests run in parallel, so open must be safe to call concurrently. Each
// call must return a new, empty store and arrange for it to be closed when
// its test ends (t.Cleanup); the suite may close it earlier, so Close must
// be idempotent.
package storetest
