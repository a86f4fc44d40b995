package store

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"time"
)

// Lock is a held PostgreSQL session advisory lock. It spans workers,
// accounts and daemon instances that share the database. If the holder dies
// its connection closes and PostgreSQL releases the lock.
type Lock struct {
	release func()
}

// Unlock releases the lock. It is safe to call more than once.
func (l *Lock) Unlock() {
	if l.release != nil {
		l.release()
		l.release = nil
	}
}

// lockKey maps a name (e.g. "u:" + unique ids, "h:" + content hash) to the
// 64-bit key PostgreSQL's advisory locks take.
func lockKey(name string) int64 {
	sum := sha256.Sum256([]byte(name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// Lock waits for the advisory lock on name. It holds a pool connection
// until Unlock, so the pool must be larger than the number of concurrent
// holders.
func (s *Store) Lock(ctx context.Context, name string) (*Lock, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	key := lockKey(name)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
		// A cancelled wait leaves the connection in an unknown state:
		// destroy it rather than return it to the pool.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return &Lock{release: func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key); err != nil {
			_ = conn.Conn().Close(ctx) // closing the session releases the lock
		}
		conn.Release()
	}}, nil
}
