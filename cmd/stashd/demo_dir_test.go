package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// stashd demo deletes D/files and sets D's mode: a directory it did not
// create, and that holds anything, is refused untouched.
func TestDemoRefusesForeignDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := filepath.Join(dir, "home")
	precious := filepath.Join(d, "files", "thesis.pdf")
	if err := os.MkdirAll(filepath.Dir(precious), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(precious, []byte("years of work"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, dir, nil, "demo", "--data-dir", d, "--database-url", "postgres://nobody@127.0.0.1:1/none", "--duration", "1s")
	if code == 0 || !strings.Contains(stderr, ".stashd-scratch") {
		t.Errorf("demo in a foreign directory: exit %d, stderr %q; want a refusal naming .stashd-scratch", code, stderr)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Fatalf("the foreign file is gone: %v", err)
	}
	if fi, _ := os.Stat(d); fi.Mode().Perm() != 0o755 {
		t.Errorf("the foreign directory's mode became %v", fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(d, ".stashd-scratch")); err == nil {
		t.Error("the foreign directory was marked as stashd's")
	}
}

// A new or empty directory is created and marked; a marked one is reused.
func TestScratchDirMarked(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "new", "demo"), empty} {
		if err := prepareScratchDir(d, true); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if _, err := os.Stat(filepath.Join(d, scratchMarker)); err != nil {
			t.Fatalf("%s not marked: %v", d, err)
		}
		if err := os.MkdirAll(filepath.Join(d, "files", "x"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := prepareScratchDir(d, true); err != nil {
			t.Errorf("%s made by stashd, second run: %v", d, err)
		}
	}
	file := filepath.Join(root, "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := prepareScratchDir(file, true); err == nil {
		t.Error("a regular file as the data directory: no error")
	}
}

// The data directory is 0700; only root with an embedded PostgreSQL, which
// runs as the postgres user and must pass through it, gets 0711. serve
// with database_url set keeps 0700, as root too.
func TestDataDirModeOpensOnlyForEmbeddedCluster(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		root, embedded bool
		want           os.FileMode
	}{{true, true, 0o711}, {true, false, 0o700}, {false, true, 0o700}, {false, false, 0o700}} {
		if got := dataDirMode(tc.root, tc.embedded); got != tc.want {
			t.Errorf("root %v, embedded %v: mode %04o, want %04o", tc.root, tc.embedded, got, tc.want)
		}
	}
	for _, embedded := range []bool{false, true} {
		d := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := prepareDataDir(d, embedded); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if want := dataDirMode(os.Geteuid() == 0, embedded); st.Mode().Perm() != want {
			t.Errorf("embedded %v: mode %04o, want %04o", embedded, st.Mode().Perm(), want)
		}
	}
	// serve with a database URL (refused: nothing listens on port 1)
	// creates the data directory 0700 before it fails.
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	run(t, dir, nil, "serve", "--simulate", "--metrics-addr", "off", "--data-dir", data, "--database-url", "postgres://stash@localhost:1/stashd?sslmode=disable")
	if st, err := os.Stat(data); err != nil {
		t.Errorf("serve with --database-url: %v", err)
	} else if st.Mode().Perm() != 0o700 {
		t.Errorf("serve with --database-url: data directory mode %04o, want 0700", st.Mode().Perm())
	}
}
