package capture

import (
	"context"
	"time"
)

// Pruner is implemented by a store that deletes old sessions on request
// (mcptape prune), and gives their disk space back.
type Pruner interface {
	// Prune deletes the sessions o selects, or with o.DryRun only lists
	// them. It never deletes a session that is open or saw traffic in the
	// last PruneGrace: a recorder may still be writing it.
	Prune(ctx context.Context, o PruneOptions) (*PruneReport, error)
}

// PruneGrace is how recent a session's last traffic may be and still be
// pruned: a session quieter than this for less time is kept, open or not.
const PruneGrace = 5 * time.Minute

// PruneOptions selects the sessions Prune deletes. With neither OlderThan
// nor MaxSize it deletes nothing.
type PruneOptions struct {
	// OlderThan, when positive, selects the sessions whose latest traffic
	// (Session.End) is older than this.
	OlderThan time.Duration `json:"olderThan,omitempty"`
	// MaxSize, when positive, then selects the oldest sessions (by Start)
	// until what is left is estimated under this many bytes on disk.
	MaxSize int64 `json:"maxSize,omitempty"`
	// DryRun lists the sessions and deletes nothing.
	DryRun bool `json:"dryRun,omitempty"`
	// Now is the time ages are measured from; zero means time.Now().
	Now time.Time `json:"now,omitzero"`
}

// PruneReport is what Prune deleted (or, on a dry run, would delete).
type PruneReport struct {
	DryRun bool `json:"dryRun,omitempty"`
	// Deleted are the sessions deleted, oldest first.
	Deleted []PrunedSession `json:"deleted"`
	// Kept counts the sessions that matched but were kept because they
	// are open or saw traffic within PruneGrace.
	Kept int `json:"kept"`
	// SizeBefore and SizeAfter are the store's size on disk before and
	// after (after: estimated on a dry run); -1 when not known.
	SizeBefore int64 `json:"sizeBefore"`
	SizeAfter  int64 `json:"sizeAfter"`
}

// PrunedSession is one session Prune deleted.
type PrunedSession struct {
	ID    string    `json:"id"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Bytes estimates the disk space it took.
	Bytes int64 `json:"bytes"`
	// Why is "age" (older than OlderThan) or "size" (over MaxSize).
	Why string `json:"why"`
}
