package badgerstore

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
