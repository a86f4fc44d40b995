package bench

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
)

// freshDatabase drops and recreates database stashd_bench_<name> on the
// server and returns its URL. The store migrates it when opened.
func (r *runner) freshDatabase(ctx context.Context, name string) (string, error) {
	db := "stashd_bench_" + name
	conn, err := pgx.Connect(ctx, r.o.ServerURL)
	if err != nil {
		return "", fmt.Errorf("connect to database server: %w", err)
	}
	defer conn.Close(ctx)
	ident := pgx.Identifier{db}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop %s: %w", db, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("create %s: %w", db, err)
	}
	return withDatabase(r.o.ServerURL, db)
}

// dropDatabase removes a database freshDatabase made; failures only log.
func (r *runner) dropDatabase(ctx context.Context, name string) {
	conn, err := pgx.Connect(context.WithoutCancel(ctx), r.o.ServerURL)
	if err != nil {
		r.log.Warn("drop bench database", "err", err)
		return
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+pgx.Identifier{"stashd_bench_" + name}.Sanitize()+" WITH (FORCE)"); err != nil {
		r.log.Warn("drop bench database", "err", err)
	}
}

// withDatabase points connStr, in either of PostgreSQL's two forms, at
// database name.
func withDatabase(connStr, name string) (string, error) {
	if strings.HasPrefix(connStr, "postgres://") || strings.HasPrefix(connStr, "postgresql://") {
		u, err := url.Parse(connStr)
		if err != nil {
			return "", fmt.Errorf("parse database url: %w", err)
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	return connStr + " dbname=" + name, nil
}
