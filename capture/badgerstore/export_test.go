package badgerstore

import "github.com/dgraph-io/badger/v4"

// RetainRound runs retention now and returns once a round that began after
// the call has ended (or at once if the store has no retention): what a
// test waits for instead of retention's 30-second ticker. A round already
// under way when it is called may have begun before the caller's writes,
// so it waits for two.
func RetainRound(s *Store) {
	g := s.space
	if g.kick == nil {
		return
	}
	for range 2 {
		g.mu.Lock()
		round := g.round
		g.mu.Unlock()
		g.wake()
		<-round
	}
}

// DropSessionRecord deletes session id's record and leaves its entry in
// the time index: the damage a listing reports as a record missing.
func DropSessionRecord(s *Store, id string) error {
	return s.db.Update(func(txn *badger.Txn) error { return txn.Delete(sessionKey(id)) })
}
