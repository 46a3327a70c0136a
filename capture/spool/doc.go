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
// A spool starts with the line "mcptape-spool 1\n". Then records, each a
// frame: the payload's length (4 bytes, big-endian), its CRC-32C (4 bytes),
// and the payload, a self-contained encoding/gob stream of one record (the
// sessions, exchanges and messages of one recorder batch, numbered by the
// wrap's own recorder from 1). The last record of a wrap that ended cleanly
// says so (End). A frame cut short or failing its checksum ends the
// readable part of the file: what follows was never completely written.
//
// While its wrap runs, a spool is locked (flock); a spool whose lock can be
// taken and that has no End record belongs to a wrap that died, and is
// complete as far as it goes.
package spool
