package capture

import (
	"context"
	"errors"
	"time"
)

// ErrInvalidEdit is returned by [Editor.EditMessage] for content that is not
// valid JSON, and by [Editor.SetLabels] for labels that are not usable.
var ErrInvalidEdit = errors.New("invalid edit")

// Editor is implemented by stores that keep the dashboard's edits: new
// versions of a message's raw bytes, and a session's labels. A store keeps
// both beside the recorded records, under their own keys, and merges them
// on read, so that the recorder rewriting a live session's record (or a
// message's) does not undo them. Both backends implement it; the storetest
// suite checks it for every store that does.
type Editor interface {
	// EditMessage makes raw the content of message seq and returns the new
	// version: 1 for the first edit, then 2, 3, …. raw must be valid JSON
	// (else ErrInvalidEdit); note is free text kept with the version. The
	// recorded bytes are kept as version 0. Reads of the message return the
	// latest version's Raw, with Size its length and Edited counting the
	// versions; the message's index (kind, method, id, links) stays as
	// recorded. A missing message is ErrNotFound.
	EditMessage(ctx context.Context, seq uint64, raw []byte, note string) (version int, err error)
	// MessageEdits returns every version of message seq, oldest first:
	// the recorded bytes as Version 0 (with the message's Time), then each
	// edit. A missing message is ErrNotFound.
	MessageEdits(ctx context.Context, seq uint64) ([]Edit, error)
	// SetLabels replaces a session's labels (nil or empty removes them).
	// They override Session.Labels as written by the recorder or an
	// import. Empty labels are ErrInvalidEdit; a missing session is
	// ErrNotFound. Deleting a session deletes its labels and its messages'
	// edits.
	SetLabels(ctx context.Context, sessionID string, labels []string) error
}

// Edit is one version of a message's raw bytes.
type Edit struct {
	// Version is 0 for the bytes as recorded, then 1, 2, … for each edit.
	Version int `json:"version"`
	// Time is when the edit was made (for version 0, when the message was
	// recorded).
	Time time.Time `json:"time"`
	// Note is what the editor said about the edit.
	Note string `json:"note,omitempty"`
	// Raw is the version's content.
	Raw []byte `json:"raw"`
}
