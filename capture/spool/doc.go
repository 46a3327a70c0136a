// Package spool hands recorded traffic from processes that do not own the
// store to the one that does.
//
// Badger allows one process per directory, while clients start many
// processes: Claude Desktop launches every stdio server as a child of its
// own, several at once, and each runs through `mcptape wrap`. So a wrap
// records with a [capture.Recorder] of its own — decoding, linking and
// redacting as any recorder does — into a [Writer]: an append-only,
// checksummed file of its own under DATA/spool/. Whoever owns the store (a
// running `record` or `dashboard`) runs an [Ingester], which reads finished
// and growing spools, renumbers their records into the store's sequence
// ([capture.Recorder.Ingest]) and deletes a spool once every record in it is
// stored and its wrap has ended. A wrap never waits on another process, and
// nothing is lost while no owner runs: the next one ingests what waited.
// Read-only commands read waiting spools with [Read] without ingesting them.
//
// # File format
//
// A spool starts with the line "mcptape-spool 2\n". Then records, each a
// frame: a sync mark (4 bytes), the payload's length (4 bytes, big-endian),
// the CRC-32C of the message count and the payload (4 bytes), the record's
// message count (4 bytes), and the payload: the length of an encoding/gob
// stream (4 bytes), the stream, a self-contained encoding of one record
// (the sessions, exchanges and messages of one recorder batch, numbered by
// the wrap's own recorder from 1, and the count of messages written so
// far), then the raw bytes of the record's long messages, which the writer
// copies from the files the recorder kept them in (see
// [capture.RawReader]): neither side holds a long line in memory twice. A
// payload is at most what a live recorder puts in one batch (80 MiB). The
// last record of a wrap that ended cleanly says so (End); every record of a
// wrap that exports its calls as spans itself says that (Traced, which
// readers of spools written before it read as false). Version 1 spools
// ("mcptape-spool 1\n": frames of length, checksum and gob) are still read.
//
// A frame cut short ends the readable part of the file: it is being
// written, or its wrap died writing it. A whole frame that fails its
// checksum, or claims more than a frame may hold, is damage: the reader
// finds the next frame by its sync mark, and the count of messages written
// in the next record says how many the damage held.
//
// While its wrap runs, a spool is locked (flock); a spool whose lock can be
// taken and that has no End record belongs to a wrap that died, and is
// complete as far as it goes.
//
// # What an owner reads
//
// Only regular files, owned by the user the owner runs as, and opened
// without blocking: a FIFO, a device, a symbolic link or another user's
// file named like a spool is left alone and named in the log. When a
// spool's wrap is gone, what could not be read (damage, a record cut
// short) is recorded on its session (incomplete, the messages counted as
// lost, a finding on its exchange that says where), and a session its wrap
// never closed (the wrap was killed) is closed; a spool with damage is
// kept in spool/damaged/ for a person to look at, instead of deleted.
//
// # When an owner looks
//
// An owner looks at the spool folder every [IngestOptions.Interval] (250
// ms) while spools in it change, which on Linux the kernel tells it of
// (inotify: a spool created, written, closed or removed); while nothing
// changes, every IdleInterval (2 s): an owner with no wrap running lists
// the folder and reads its spools' locks half a time a second instead of
// four. Where it cannot be told (another system, or inotify's limits
// reached), it looks every Interval.
package spool
