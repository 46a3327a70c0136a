package spool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcptape/mcptape/capture/spool"
	"github.com/mcptape/mcptape/fixtures"
)

// An owner whose spool folder is still is looked at seldom (IdleInterval,
// a minute here), yet a spool written meanwhile is ingested at once: the
// kernel tells the ingester of it.
func TestIngesterIsToldOfNewSpools(t *testing.T) {
	dir := t.TempDir()
	o := openOwnerWith(t, dir, &spool.IngestOptions{Interval: 50 * time.Millisecond, IdleInterval: time.Minute})
	defer o.close(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.ing.Run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(200 * time.Millisecond) // the first pass, on an empty folder, is over
	for i := range 2 {
		wrapSide(t, dir, fmt.Sprintf("late%d", i), 10, true)
		fixtures.Eventually(t, 5*time.Second, func() error {
			if st := o.ing.Stats(); st.Files != int64(i+1) || st.Removed != int64(i+1) {
				return fmt.Errorf("spool %d not ingested and removed: %+v", i+1, st)
			}
			return nil
		})
	}
	if n := len(onlySessions(t, o.store)); n != 2 {
		t.Errorf("%d sessions stored, want 2", n)
	}
}
