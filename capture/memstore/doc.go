// Package memstore is an in-memory [capture.Store]: maps with sorted
// indexes behind one lock. It is the reference backend of the storetest
// suite and the store for tests, demos and short-lived recordings that need
// no disk.
//
// # Copies
//
// Write copies every record it is given and every read returns a fresh
// copy, so neither the caller's batch nor a record a caller got back can
// alias what the store holds. Times lose their monotonic clock reading on
// the way in, as they would through any persistent backend.
//
// # Snapshots
//
// Stored records are never changed in place: an upsert replaces the pointer.
// An iterator collects the pointers it will yield under the read lock when
// iteration starts and copies each one as it yields it, so it sees a
// consistent snapshot without holding the lock while the caller's loop body
// runs. Collecting costs one pointer per yielded record (bounded by the
// query's Limit).
//
// # Example
//
//	s := memstore.New()
//	defer s.Close()
//	err := s.Write(ctx, &capture.Batch{Sessions: []*capture.Session{{ID: "s1", Start: time.Now()}}})
//	for sess, err := range s.Sessions(ctx, capture.SessionQuery{Limit: 10}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(sess.ID)
//	}
package memstore
