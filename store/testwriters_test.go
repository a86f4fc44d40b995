package store

import (
	"context"
	"fmt"
)

// The writers and lookups below serve tests only: the daemon writes a
// package's verification, signature and links in CataloguePackage's one
// unit and looks packages up with the Look… statements. The catalogue
// test compares CataloguePackage's rows with what these wrote.

// PackageByHash returns the id of the package with this content hash
// (dedup layer 4).
func (s *Store) PackageByHash(ctx context.Context, hash []byte) (int64, bool, error) {
	var f Found
	if err := s.look(ctx, LookPackageByHash(hash, &f)); err != nil {
		return 0, false, fmt.Errorf("look up content hash: %w", err)
	}
	return f.ID, f.OK, nil
}

// PackageBySignature returns the first package catalogued, other than
// except, whose content signature is sig: the package a new one repacks.
func (s *Store) PackageBySignature(ctx context.Context, sig []byte, except int64) (int64, bool, error) {
	var f Found
	if err := s.look(ctx, LookPackageBySignature(sig, except, &f, new(bool))); err != nil {
		return 0, false, fmt.Errorf("find package by content: %w", err)
	}
	return f.ID, f.OK, nil
}

// LinkContainment links package pkg as contained in every catalogued
// package that holds all of its files and more, and every package whose
// files are all in pkg's (and fewer) as contained in pkg. Files are
// matched on path, size and CRC-32; directories are left out, and a
// package with a file of unknown CRC (or none) takes no part. It returns
// how many links it made.
func (s *Store) LinkContainment(ctx context.Context, pkg int64) (int, error) {
	// Candidates are found through the CRC index, then counted whole.
	tag, err := s.pool.Exec(ctx, fmt.Sprintf(containmentSQL, "$1::bigint"), pkg)
	if err != nil {
		return 0, fmt.Errorf("link the packages package %d contains or is contained in: %w", pkg, err)
	}
	return int(tag.RowsAffected()), nil
}

// SetContentSignature records package pkg's content signature.
func (s *Store) SetContentSignature(ctx context.Context, pkg int64, sig []byte) error {
	if _, err := s.pool.Exec(ctx, `UPDATE packages SET content_sig = $2 WHERE id = $1`, pkg, sig); err != nil {
		return fmt.Errorf("record content of package %d: %w", pkg, err)
	}
	return nil
}

// SetVerification records v for package pkg.
func (s *Store) SetVerification(ctx context.Context, pkg int64, v Verification) error {
	susp := v.Suspicious
	if susp == nil {
		susp = []string{}
	}
	_, err := s.pool.Exec(ctx, `UPDATE packages SET verified = $2, broken = $3, name_lied = $4, suspicious = $5
		WHERE id = $1`, pkg, v.Verified, text(v.Broken), v.NameLied, susp)
	if err != nil {
		return fmt.Errorf("record verification of package %d: %w", pkg, err)
	}
	return nil
}
