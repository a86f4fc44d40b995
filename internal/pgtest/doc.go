// Package pgtest gives every test that needs PostgreSQL its own fresh,
// migrated database, on a real server.
//
// A test package opts in from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// and each test calls New for a connection string of its own database. With
// STASHD_TEST_DATABASE_URL set, the databases are created on that server
// (PostgreSQL 13 or later, for DROP DATABASE ... WITH (FORCE); the
// role needs CREATEDB); otherwise Main's binary runs one private
// cluster (internal/pgembed, Fast settings) under /dev/shm when that is a
// memory file system with 2 GB free, else under the temporary directory,
// started at the first New and stopped when the tests end. The PostgreSQL
// server binaries must be installed: the Makefile installs the postgresql
// package when they are missing.
//
// pgtest imports store for its migrations, so store's own tests that use it
// must be in package store_test.
//
// pgtest owns the databases it creates and the private cluster; it never
// touches other databases of a server given by STASHD_TEST_DATABASE_URL.
package pgtest
