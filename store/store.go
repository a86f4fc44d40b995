package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	"stashd/internal/redact"
	"stashd/migrations"
)

// ErrNotFound is returned when a row that the caller expected is absent.
var ErrNotFound = errors.New("not found")

// Store is the catalogue and coordination state, over a pgx pool.
type Store struct {
	pool *pgxpool.Pool
	// leasePool is the account leases' own small pool (see leaseConns):
	// however busy the main pool is, a lease renewal finds a connection.
	leasePool *pgxpool.Pool
	// id names this Store as the owner of the package locks it takes.
	id      string
	lockTTL time.Duration
	// searchBounds bounds Search's walks; zero fields take the defaults.
	searchBounds searchBounds
	// server tracks the identity of the servers the pool connects to
	// (rewind.go): a new one after a failover is noticed before the first
	// statement on its connection.
	server serverWatch
	// commits is the group committer (groupcommit.go); nil when read-only.
	commits *committer
	// owners are the leases this store took, whose owner its fenced
	// writes name (leases.go).
	owners leaseOwners
	// keeper renews the package locks held (lockkeeper.go).
	keeper lockKeeper
}

// Config configures Open.
type Config struct {
	// URL is a PostgreSQL connection string.
	URL string
	// MaxConns bounds the pool; zero means 16. No connection is held
	// between statements (package locks are rows), so it bounds the
	// statements in flight at once, not the work. The account leases have
	// a pool of their own on top of it.
	MaxConns int32
	// LockTTL is how long a package lock lasts without renewal (its holder
	// renews it every third of it); a dead holder's lock is taken over
	// once it has expired. Zero means DefaultLockTTL (30 s).
	LockTTL time.Duration
	// ReadOnly opens the catalogue for reading: no migrations are applied
	// and every transaction is read-only, so a role granted only SELECT
	// can be used. False: migrate and read-write.
	ReadOnly bool
	// Tracer, when set, sees every statement, batch and COPY the store's
	// connections send (pgx's tracer interfaces); the benchmark counts
	// round trips with it. Nil: none.
	Tracer pgx.QueryTracer
	// GroupCommitSize is the most units of work (a package's catalogue
	// writes, say) one group commit holds (see Commit); zero means
	// MaxGroupCommitSize (64), also the most allowed.
	GroupCommitSize int
	// GroupCommitFlushes is how many group commits may be in flight at
	// once, each on a connection of its own; zero means
	// DefaultGroupCommitFlushes (2), the most allowed is
	// MaxGroupCommitFlushes.
	GroupCommitFlushes int
	// GroupCommitDelay is how long a free flusher waits for more units
	// once it has fewer than GroupCommitSize. Zero: it flushes at once
	// (units that arrive while every flusher is busy go in the next
	// batch), so a lone unit waits for nothing.
	GroupCommitDelay time.Duration
}

// Open connects to PostgreSQL, applies pending migrations and returns a
// Store. The database must be reachable: a dead database is an error here,
// not later.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	pcfg, err := pgxpool.ParseConfig(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", redact.Error(err, cfg.URL))
	}
	pcfg.MaxConns = 16
	if cfg.MaxConns > 0 {
		pcfg.MaxConns = cfg.MaxConns
	}
	if cfg.ReadOnly {
		pcfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	if cfg.Tracer != nil {
		pcfg.ConnConfig.Tracer = cfg.Tracer
	}
	st := &Store{id: newStoreID(), lockTTL: lockTTL(cfg.LockTTL)}
	st.server.writes = !cfg.ReadOnly
	st.server.era = 1
	pcfg.AfterConnect = st.server.afterConnect
	if pcfg.ConnConfig.ValidateConnect != nil && !cfg.ReadOnly {
		// target_session_attrs=read-write: a server that turned read-only
		// (a demoted primary, a standby) reports it, and its connections
		// are dropped so that new ones find the server that takes writes.
		pcfg.PrepareConn = func(_ context.Context, conn *pgx.Conn) (bool, error) {
			pc := conn.PgConn()
			return pc.ParameterStatus("default_transaction_read_only") != "on" && pc.ParameterStatus("in_hot_standby") != "on", nil
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", redact.Error(err, cfg.URL))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", redact.Error(err, cfg.URL))
	}
	st.pool = pool
	if cfg.ReadOnly {
		return st, nil
	}
	if cfg.GroupCommitSize < 0 || cfg.GroupCommitSize > MaxGroupCommitSize || cfg.GroupCommitDelay < 0 ||
		cfg.GroupCommitFlushes < 0 || cfg.GroupCommitFlushes > MaxGroupCommitFlushes {
		pool.Close()
		return nil, fmt.Errorf("group commit of %d units, %d at once, after %s: size must be 0 (the default) to %d, flushes 0 (the default) to %d, delay not negative",
			cfg.GroupCommitSize, cfg.GroupCommitFlushes, cfg.GroupCommitDelay, MaxGroupCommitSize, MaxGroupCommitFlushes)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", redact.Error(err, cfg.URL))
	}
	err = Migrate(ctx, conn.Conn())
	conn.Release()
	if err != nil {
		pool.Close()
		return nil, err
	}
	lcfg := pcfg.Copy()
	// No connection until the first lease: a command or a test that takes
	// none opens none (each costs the server a process).
	lcfg.MaxConns, lcfg.MinConns = leaseConns, 0
	if st.leasePool, err = pgxpool.NewWithConfig(ctx, lcfg); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	st.commits = newCommitter(pool, cmp.Or(cfg.GroupCommitSize, MaxGroupCommitSize),
		cmp.Or(cfg.GroupCommitFlushes, DefaultGroupCommitFlushes), cfg.GroupCommitDelay)
	return st, nil
}

// leaseConns is the size of the leases' pool: a renewal and an
// acquisition or release may run at once; more waits its turn, briefly,
// since nothing else uses it.
const leaseConns = 2

// leases returns the pool the account leases use.
func (s *Store) leases() *pgxpool.Pool {
	if s.leasePool != nil {
		return s.leasePool
	}
	return s.pool
}

// Migrate applies every pending migration on conn. tern serialises
// concurrent migrators with an advisory lock, so several instances starting
// at once are safe.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	m, err := migrate.NewMigrator(ctx, conn, "stashd_schema_version")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := m.LoadMigrations(migrations.FS); err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

// Close stops the group committer, once its flush in flight has ended,
// and closes the pools.
func (s *Store) Close() {
	if s.commits != nil {
		s.commits.close()
	}
	if s.leasePool != nil {
		s.leasePool.Close()
	}
	s.pool.Close()
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Pool exposes the pool for tests and the status command.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
