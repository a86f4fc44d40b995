package store

import (
	"context"
	"time"
)

// PingTimeout bounds PingLeases.
const PingTimeout = 2 * time.Second

// PingLeases checks that the database answers, through the account
// leases' own pool and within PingTimeout: however busy the main pool is
// (every connection taken by ingest), the answer is about the database's
// health, not about the load.
func (s *Store) PingLeases(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	return s.leases().Ping(ctx)
}
