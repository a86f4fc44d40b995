package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The kinds of link between two packages.
const (
	// LinkRepack: the package holds the same files (paths, sizes, CRCs)
	// as the other in other archive bytes.
	LinkRepack = "repack"
	// LinkContainedIn: every file of the package is in the other, which
	// holds more.
	LinkContainedIn = "contained_in"
)

// PackageBySignature returns the first catalogued package other than
// except whose content signature is sig.
func (s *Store) PackageBySignature(ctx context.Context, sig []byte, except int64) (int64, bool, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM packages WHERE content_sig = $1 AND id <> $2 ORDER BY id LIMIT 1`,
		sig, except).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("find package by content: %w", err)
	}
	return id, true, nil
}

// SetContentSignature records package pkg's content signature.
func (s *Store) SetContentSignature(ctx context.Context, pkg int64, sig []byte) error {
	if _, err := s.pool.Exec(ctx, `UPDATE packages SET content_sig = $2 WHERE id = $1`, pkg, sig); err != nil {
		return fmt.Errorf("record content of package %d: %w", pkg, err)
	}
	return nil
}

// LinkPackages records that package pkg is kind (LinkRepack,
// LinkContainedIn) of other. Linking twice is harmless.
func (s *Store) LinkPackages(ctx context.Context, pkg, other int64, kind string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO package_links (package_id, other_id, kind) VALUES ($1, $2, $3)
		ON CONFLICT (package_id, other_id) DO NOTHING`, pkg, other, kind)
	if err != nil {
		return fmt.Errorf("link package %d to %d: %w", pkg, other, err)
	}
	return nil
}

// PackageLink is one link of a package to another.
type PackageLink struct {
	Other int64
	Kind  string
}

// PackageLinks returns the links of package pkg to others.
func (s *Store) PackageLinks(ctx context.Context, pkg int64) ([]PackageLink, error) {
	rows, err := s.pool.Query(ctx, `SELECT other_id, kind FROM package_links WHERE package_id = $1 ORDER BY other_id`, pkg)
	if err != nil {
		return nil, fmt.Errorf("read links of package %d: %w", pkg, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[PackageLink])
}

// IsRepack reports whether package pkg is linked as a repack of another.
func (s *Store) IsRepack(ctx context.Context, pkg int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM package_links WHERE package_id = $1 AND kind = 'repack')`, pkg).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read links of package %d: %w", pkg, err)
	}
	return ok, nil
}
