// Package badgerstore is a [capture.Store] on [Badger], an embedded
// key-value store on disk: the store mcptape records into by default.
//
//	s, err := badgerstore.Open(dir, nil)
//	if errors.Is(err, badgerstore.ErrLocked) {
//		// another mcptape process is recording into dir
//	}
//	defer s.Close()
//	rec, err := capture.NewRecorder(ctx, s, nil)
//
// One process at a time may open a directory: Badger locks it, and [Open]
// then fails with an error wrapping [ErrLocked]. Tools that want to read a
// live recording go through the recording process (its dashboard API)
// instead.
//
// # Key layout
//
// Keys are grouped by a short prefix. <sid> is a session ID preceded by its
// length as a uvarint, which keeps the keys of session "a" out of a prefix
// scan of session "a/b"; numbers are 8 bytes big-endian so that keys sort
// numerically; <start> is a 12-byte time that sorts by time (Unix seconds
// with the sign bit flipped, then nanoseconds).
//
//	s/<session ID>        session record
//	t/<start><session ID> (empty) time index: Sessions walks it backwards
//	x/<sid><exchange ID>  exchange record
//	xi/<exchange ID>      <sid>: finds an exchange's record by ID
//	m/<sid><seq>          message index record: every field but Raw
//	r/<seq>               <sid>, chunk count n (uvarint), first chunk of Raw
//	r/<seq><i BE4>        chunk i of Raw, for i in 1..n
//	e/<seq><v BE4>        edit v ≥ 1 of a message's Raw: time, note, chunk
//	                      count n (uvarint), first chunk of the new Raw
//	e/<seq><v BE4><i BE4> chunk i of edit v, for i in 1..n
//	l/<session ID>        labels set with SetLabels: count, then each label
//	p/<pack ID>           where the recorded blobs of pack file <pack ID> end
//	                      (8 bytes BE), written with their heads (see packs)
//	meta/version          schema version, ASCII decimal ("1")
//	meta/last             high-water marks: last seq, last exchange ID
//
// Edits and labels ([capture.Editor]) have keys of their own, so that the
// recorder rewriting a message or a session record does not undo them;
// reads merge them in. The store remembers in memory which messages have
// edits and which sessions labels (loaded when it opens), so reading the
// others costs no lookup. They came after schema version 1 without
// changing it: older stores open unchanged, and a message record gains a
// trailing Edited field only when one is written with it set.
//
// On disk, Raw of 256 KiB or more is not in Badger at all: r/<seq> holds
// the chunk count 0xFFFFFFFF and no bytes, and the bytes are the file
// blobs/<seq as 16 hex digits> in the store's directory. Large tool results
// would otherwise be rewritten by every compaction, or sit in the process's
// memory through Badger's memory-mapped value log. On Linux, blobs written
// from memory are appended to pack files instead, with direct I/O where
// the file system takes it (see packs), and a blob file's pages leave the
// page cache once they are written back (see blobCache), so that recording
// large results does not take new memory for every one.
//
// Raw bytes live beside the index, under their own keys, so that listings
// with [capture.MessageQuery.NoRaw] never read them. They are cut into
// chunks below Badger's value threshold (about 600 KiB by default), so
// every value stays in the LSM tree: Badger refuses larger values in
// memory, and on disk the value log would need garbage collection to give
// back the space of deleted sessions. Compaction reclaims deleted keys
// instead.
//
// An upsert that moves a record (a session's Start, an exchange's or a
// message's session) deletes the old index keys in the same transaction.
// DeleteSession deletes a session's messages, raw chunks and exchanges in
// batches, then the session record with its time index key in one final
// transaction, so that an interrupted delete leaves the session listed, to
// be deleted again.
//
// # Records
//
// Records are a compact binary encoding (see codec.go): fields in a fixed
// order, numbers as varints, enums as one byte, strings and byte strings
// with a length prefix, IDs that the key holds left out. Byte fields (raw
// ids, capabilities, SSE prefixes) are kept exactly, which encoding/json
// would not do: it compacts and HTML-escapes json.RawMessage and fails on
// invalid JSON. A message index record of a typical tools/call result
// takes about 120 bytes and 70 ns to encode, against 380 bytes and 2.5 µs
// for encoding/json (BenchmarkMessageCodec).
//
// # Versions
//
// meta/version holds the schema version, written when a store is created.
// Open refuses a directory whose version it does not know, or a Badger
// database with no version, with an error wrapping [ErrSchema] that names
// the version. Changing the key layout, a record's fields or an enum's
// numeric value needs a new version.
//
// # Writes
//
// The recorder is the single batching writer and calls Write once per
// drained batch. Write serializes with DeleteSession, looks up old state
// only for IDs at or below the high-water marks (a new message costs no
// read), and writes the batch as one Badger transaction, split into
// several only when it exceeds Badger's transaction size (about 15% of
// [Options.MemTableSize]). BenchmarkWrite measures batches of 256 messages
// of about 400 bytes each.
//
// # Memory
//
// The defaults are sized for a developer's machine rather than Badger's
// server defaults: 4 MiB memtables (four at most), 1 MiB tables, a 16 MiB
// block cache. At rest the store uses a few tens of megabytes. Under
// sustained writes of about 100,000 messages a second the process peaks
// at several hundred megabytes, most of it buffers that Badger's table
// builders keep in a pool and release within about half a minute once
// writes stop; Badger's memory-mapped tables add page cache on top, which
// the kernel reclaims as needed.
//
// [Badger]: https://github.com/dgraph-io/badger
package badgerstore
