package boltstore

import (
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/actgate/actgate/internal/authority"
	"github.com/actgate/actgate/internal/journal"
)

// Snapshot is everything a store file holds: every authority and every dispatch record, read in
// one read-only transaction.
type Snapshot struct {
	// Authorities in authority ID order.
	Authorities []authority.Record
	// Dispatches in operation ID order.
	Dispatches []journal.DispatchRecord
}

// ReadSnapshot opens the store file at path read-only and returns all of it. It is for tools
// that audit a store after the process that wrote it stopped (test/load checks every run's
// journal this way): it takes bbolt's shared lock, so it waits up to timeout while a writer
// holds the file and fails with an error matching journal.ErrUnavailable and
// authority.ErrStoreUnavailable after that, and it never writes, recovers or
// verifies signatures (a record is returned as stored; a corrupt one is an error).
func ReadSnapshot(path string, timeout time.Duration) (Snapshot, error) {
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: timeout})
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return Snapshot{}, unavailablef("%s is held by a writer", path)
		}
		return Snapshot{}, unavailable(err)
	}
	defer db.Close()
	var snap Snapshot
	err = db.View(func(tx *bolt.Tx) error {
		var schema string
		if meta := tx.Bucket(bucketMeta); meta != nil {
			schema = string(meta.Get(keySchema))
		}
		if schema != schemaVersion && schema != schemaVersion3 && schema != schemaVersion2 && schema != schemaVersion1 {
			return unavailablef("%s is not a store of schema %s, %s, %s or %s", path, schemaVersion1, schemaVersion2, schemaVersion3, schemaVersion)
		}
		if b := tx.Bucket(bucketAuthorities); b != nil {
			if err := b.ForEach(func(k, v []byte) error {
				s, err := decodeStored(v)
				if err != nil {
					return fmt.Errorf("authority %q: %w", k, err)
				}
				r, err := s.record()
				if err != nil {
					return fmt.Errorf("authority %q: %w", k, err)
				}
				snap.Authorities = append(snap.Authorities, r)
				return nil
			}); err != nil {
				return err
			}
		}
		if b := tx.Bucket(bucketDispatch); b != nil {
			return b.ForEach(func(k, v []byte) error {
				r, err := decodeRecord(v)
				if err != nil {
					return fmt.Errorf("dispatch %q: %w", k, err)
				}
				snap.Dispatches = append(snap.Dispatches, r)
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return Snapshot{}, err
	}
	return snap, nil
}
