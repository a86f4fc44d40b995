package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WithOwnPool returns a Store on the same database over a pool of its own
// of conns connections, whose statements the server cancels after
// timeout (zero: no limit). Its reads never wait for a connection of s's
// pool, however busy ingest keeps it: the web console runs on one. It
// takes no leases; the caller closes it.
func (s *Store) WithOwnPool(ctx context.Context, conns int32, timeout time.Duration) (*Store, error) {
	cfg := s.pool.Config()
	cfg.MaxConns, cfg.MinConns = conns, 0
	if timeout > 0 {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
	}
	own := &Store{id: s.id, lockTTL: s.lockTTL, searchBounds: s.searchBounds}
	cfg.AfterConnect = own.server.afterConnect
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	own.pool = pool
	return own, nil
}
