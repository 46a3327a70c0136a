package memstore_test

import (
	"testing"

	"github.com/mcptape/mcptape/capture"
	"github.com/mcptape/mcptape/capture/memstore"
	"github.com/mcptape/mcptape/capture/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) capture.Store {
		s := memstore.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
