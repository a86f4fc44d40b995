// Package pgembed starts and stops a private PostgreSQL cluster from the
// system's PostgreSQL server binaries (initdb and postgres). It backs the
// daemon's embedded default and the test harness in internal/pgtest.
//
// The cluster lives in one directory: the data directory, the server log
// and, when the path is short enough, the unix socket. It listens on that
// unix socket only, never on TCP, and uses trust authentication for the
// superuser "stashd"; the socket directory is 0700 and owned by the user
// the server runs as, so only that user (and root) can connect.
//
// PostgreSQL refuses to run as root, so when stashd runs as root the
// cluster runs as the "postgres" system user, which the postgresql package
// creates. When no server binaries are found, the project's Makefile
// installs the postgresql package; FindBinDir's error says so.
//
// pgembed owns the cluster's processes and files only: it never creates
// databases or schema (store and pgtest do) and never touches a server it
// did not start.
package pgembed
