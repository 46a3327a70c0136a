package capture

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"
)

// Store errors callers branch on.
var (
	// ErrNotFound is returned for a session, exchange or message that is
	// not in the store.
	ErrNotFound = errors.New("not found")
	// ErrClosed is returned by every method after Close.
	ErrClosed = errors.New("store closed")
	// ErrStoreFull is wrapped by a Write error when the store refused
	// records to keep free space on its disk or to stay within its size
	// bound. The error's text says which, for users; writes succeed again
	// once there is room.
	ErrStoreFull = errors.New("store full")
	// ErrDamaged is wrapped by a read error when the store holds records
	// it cannot read (a checksum mismatch, a missing or undecodable
	// record). Iterators yield every record they can read first and the
	// damage last, naming it.
	ErrDamaged = errors.New("store damaged")
)

// PartialWriteError is returned by [Store.Write] when it stored part of a
// batch: Refused holds the records it did not store (whole records, never
// part of one), Err says why. Records of the batch not in Refused are
// stored.
type PartialWriteError struct {
	Refused *Batch
	Err     error
}

func (e *PartialWriteError) Error() string {
	return fmt.Sprintf("%d of the batch's records were not stored: %v", e.Refused.Len(), e.Err)
}

func (e *PartialWriteError) Unwrap() error { return e.Err }

// Reader reads sessions, exchanges and messages. Implementations are safe
// for concurrent use; iterators see a consistent snapshot taken when
// iteration starts. A store held by another process is read through one
// (remotestore).
type Reader interface {
	// Session returns one session, or ErrNotFound.
	Session(ctx context.Context, id string) (*Session, error)
	// Sessions yields sessions newest first (by Start, then ID).
	Sessions(ctx context.Context, q SessionQuery) iter.Seq2[*Session, error]
	// Exchanges yields a session's exchanges in ID order.
	Exchanges(ctx context.Context, sessionID string) iter.Seq2[*Exchange, error]
	// Exchange returns one exchange, or ErrNotFound.
	Exchange(ctx context.Context, id uint64) (*Exchange, error)
	// Messages yields a session's messages in Seq order.
	Messages(ctx context.Context, sessionID string, q MessageQuery) iter.Seq2[*Message, error]
	// Message returns one message with its Raw, or ErrNotFound.
	Message(ctx context.Context, seq uint64) (*Message, error)
	// LastIDs returns the highest message Seq and exchange ID stored, so a
	// recorder reopening a store continues after them (and a live reader
	// knows where the store is).
	LastIDs(ctx context.Context) (seq, exchange uint64, err error)
}

// Writer takes what a [Recorder] produces. Implementations are safe for
// concurrent use.
type Writer interface {
	// Write stores a batch: sessions and exchanges are upserted whole
	// (the last write of an ID wins), messages are added (a Seq already
	// present is replaced). A batch is applied atomically where the
	// backend allows it.
	Write(ctx context.Context, b *Batch) error
	// LastIDs is as in [Reader]: where the recorder's numbering continues.
	LastIDs(ctx context.Context) (seq, exchange uint64, err error)
}

// SessionCounter is implemented by a store that knows how many sessions it
// holds without reading them (a dashboard's first page says how many
// there are).
type SessionCounter interface {
	// CountSessions returns the number of sessions Sessions would yield
	// with no query.
	CountSessions(ctx context.Context) (int, error)
}

// Snapshotter is implemented by a store that reads fast from one snapshot
// through a Reader of its own, which reuses its cursors from one call to
// the next: reading many sessions one after another (an export of a whole
// store) then costs a seek per session rather than opening a read and its
// iterators each time.
type Snapshotter interface {
	// Snapshot returns a Reader of the store as it is now, for one
	// goroutine, and the function that releases it (the store's Close
	// waits for that).
	Snapshot(ctx context.Context) (Reader, func(), error)
}

// RawCopier is a Writer whose Write keeps no reference to a message's Raw
// once it returns: it has written or copied the bytes. A recorder writing
// to one reuses the memory of a large response's Raw for later ones.
type RawCopier interface {
	Writer
	CopiesRaw()
}

// Store keeps sessions, exchanges and messages: a [Reader] and a [Writer]
// that owns its data. Every backend passes the storetest suite.
type Store interface {
	Reader
	Writer
	// DeleteSession removes a session with its exchanges and messages.
	// Deleting a missing session returns ErrNotFound.
	DeleteSession(ctx context.Context, id string) error
	// Close releases the store; later calls return ErrClosed.
	Close() error
}

// Batch is one write: what the recorder produced since its last write.
type Batch struct {
	Sessions  []*Session
	Exchanges []*Exchange
	Messages  []*Message

	syncs    []chan struct{} // closed once the batch is written (Recorder.Sync)
	lingered bool            // gathered over pipeLinger: the writer does not linger for it
	// foreign are the batch's messages ingested from a spool
	// (Recorder.Ingest): should the store refuse them, they are not lost,
	// since the spool keeps them and its ingester tries again.
	foreign map[*Message]struct{}
	// edits are versions of its messages to store once it is written
	// (intercepted messages; see Intercepted)
	edits []pendingEdit
	// held is the raw bytes the batch holds against the recorder's
	// budget of bytes between the pipeline and the writer (wbytes)
	held int64
	// bufs are buffers its messages' Raw lie in, to reuse once it is
	// written (see bigBuffers)
	bufs [][]byte
}

// rawBytes is the raw bytes the batch's messages hold.
func (b *Batch) rawBytes() int {
	n := 0
	for _, m := range b.Messages {
		n += len(m.Raw)
	}
	return n
}

// Len is the number of records in the batch.
func (b *Batch) Len() int { return len(b.Sessions) + len(b.Exchanges) + len(b.Messages) }

// SessionQuery narrows Sessions. The zero value yields every session.
type SessionQuery struct {
	// Limit stops after this many sessions; 0 means no limit.
	Limit int
	// Since and Until bound Start (inclusive, exclusive); zero means unbounded.
	Since, Until time.Time
}

// MessageQuery narrows Messages. The zero value yields every message with
// its Raw bytes.
type MessageQuery struct {
	// After yields only messages with Seq > After.
	After uint64
	// Limit stops after this many messages; 0 means no limit.
	Limit int
	// NoRaw leaves Raw nil (Size is still set), for listings.
	NoRaw bool
}

// Verifier is implemented by a store that can check itself for damage
// (mcptape verify).
type Verifier interface {
	// Verify reads the whole store and reports what is damaged. It only
	// reads; the error is for Verify itself failing, not for damage.
	Verify(ctx context.Context) (*VerifyReport, error)
}

// VerifyReport is what a Verify checked and found.
type VerifyReport struct {
	Tables, Sessions, Messages, Exchanges int
	// Damage lists what is wrong; empty when the store is sound.
	Damage []Damage `json:"damage,omitempty"`
}

// OK reports whether Verify found no damage.
func (r *VerifyReport) OK() bool { return len(r.Damage) == 0 }

// Damage is one thing Verify found wrong: where, and what.
type Damage struct {
	// Where names the file, session or record: "table 000012.sst",
	// "session 20260301-…".
	Where string `json:"where"`
	What  string `json:"what"`
}

func (d Damage) String() string { return d.Where + ": " + d.What }
