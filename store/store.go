package store

import (
	"context"
	"errors"
	"fmt"

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
	// searchBounds bounds Search's walks; zero fields take the defaults.
	searchBounds searchBounds
}

// Config configures Open.
type Config struct {
	// URL is a PostgreSQL connection string.
	URL string
	// MaxConns bounds the pool; zero means 16. Each ingest worker may hold
	// one connection for a package lock while it works, so this should
	// exceed the total number of workers.
	MaxConns int32
	// ReadOnly opens the catalogue for reading: no migrations are applied
	// and every transaction is read-only, so a role granted only SELECT
	// can be used. False: migrate and read-write.
	ReadOnly bool
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
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", redact.Error(err, cfg.URL))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", redact.Error(err, cfg.URL))
	}
	if cfg.ReadOnly {
		return &Store{pool: pool}, nil
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
	return &Store{pool: pool}, nil
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

// Close closes the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Pool exposes the pool for tests and the status command.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
