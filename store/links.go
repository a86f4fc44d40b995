package store

import (
	"context"
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

// IsRepack reports whether package pkg is linked as a repack of another
// whose content signature stands on its bytes (sig_checked): a repack of
// a package whose CRCs are only its headers' claim is delivered like any
// package, so it is no repack here.
func (s *Store) IsRepack(ctx context.Context, pkg int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM package_links l JOIN packages o ON o.id = l.other_id
		WHERE l.package_id = $1 AND l.kind = 'repack' AND o.sig_checked)`, pkg).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("read links of package %d: %w", pkg, err)
	}
	return ok, nil
}

// containmentSQL links the package whose id %[1]s gives to the packages it
// contains or is contained in: one is contained in the other when every
// file of the smaller (path, size and CRC) is in the larger.
const containmentSQL = `
		WITH mine AS (
			SELECT path, size, crc FROM package_files WHERE package_id = %[1]s AND NOT is_dir
		), ok AS (
			SELECT count(*) AS n FROM mine HAVING count(*) > 0 AND count(*) = count(crc)
		), shared AS (
			SELECT f.package_id, count(*) AS n FROM mine m
			JOIN package_files f ON f.crc = m.crc AND f.size = m.size AND f.path = m.path
			WHERE f.package_id <> %[1]s AND NOT f.is_dir AND EXISTS (SELECT 1 FROM ok)
			GROUP BY f.package_id
		), cand AS (
			SELECT s.package_id, s.n AS shared, c.n AS total, c.crcs FROM shared s
			CROSS JOIN LATERAL (SELECT count(*) AS n, count(crc) AS crcs FROM package_files
				WHERE package_id = s.package_id AND NOT is_dir) c
		), pairs AS (
			-- pkg inside a larger package
			SELECT %[1]s AS inner_id, c.package_id AS outer_id FROM cand c, ok
			WHERE c.shared = ok.n AND c.total > c.shared AND c.crcs = c.total
			UNION
			-- a smaller package inside pkg
			SELECT c.package_id, %[1]s FROM cand c, ok
			WHERE c.shared = c.total AND c.crcs = c.total AND ok.n > c.shared
		)
		INSERT INTO package_links (package_id, other_id, kind)
		SELECT inner_id, outer_id, 'contained_in' FROM pairs
		ON CONFLICT (package_id, other_id) DO NOTHING`
