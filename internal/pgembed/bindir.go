package pgembed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// debianRoot is where Debian's postgresql-NN packages put their server
// binaries, one directory per major version, outside PATH.
const debianRoot = "/usr/lib/postgresql"

// errNoBinaries is wrapped by FindBinDir's error so that callers and tests
// can recognise it.
var errNoBinaries = errors.New("PostgreSQL server binaries not found")

// FindBinDir returns the directory holding the PostgreSQL server binaries:
// the directory of "postgres" found in PATH when "initdb" is beside it,
// otherwise /usr/lib/postgresql/<highest version>/bin. When neither has
// them, the error tells the user to install the postgresql package (the
// Makefile does so when the binaries are missing).
func FindBinDir() (string, error) {
	return findBinDir(os.Getenv("PATH"), debianRoot)
}

func findBinDir(pathList, libRoot string) (string, error) {
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, "postgres")
		if !isExecutable(p) {
			continue
		}
		// /usr/local/bin may hold symlinks into a version's bin directory;
		// either directory works when it holds every binary.
		if hasBinaries(dir) {
			return dir, nil
		}
		if real, err := filepath.EvalSymlinks(p); err == nil && hasBinaries(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
	}
	entries, _ := os.ReadDir(libRoot)
	best, bestVersion := "", []int(nil)
	for _, e := range entries {
		v, ok := parseVersion(e.Name())
		if !ok {
			continue
		}
		dir := filepath.Join(libRoot, e.Name(), "bin")
		if hasBinaries(dir) && versionLess(bestVersion, v) {
			best, bestVersion = dir, v
		}
	}
	if best != "" {
		return best, nil
	}
	return "", fmt.Errorf("%w in PATH or %s/<version>/bin: install the postgresql package (apt-get install postgresql; make does this when they are missing)", errNoBinaries, libRoot)
}

// checkBinDir reports which of the programs Start runs dir lacks; a
// directory counts as a PostgreSQL bin directory only when it holds all.
func checkBinDir(dir string) error {
	var missing []string
	for _, name := range []string{"initdb", "postgres"} {
		if !isExecutable(filepath.Join(dir, name)) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s missing in %s: install the postgresql package (make does this when they are missing)", errNoBinaries, strings.Join(missing, ", "), dir)
	}
	return nil
}

func hasBinaries(dir string) bool { return checkBinDir(dir) == nil }

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// parseVersion parses a directory name such as "15" or "9.6".
func parseVersion(name string) ([]int, bool) {
	var v []int
	for _, part := range strings.Split(name, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

// versionLess compares versions numerically, so that 15 beats 9.6; nil is
// less than every version.
func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

// lookBinDir is FindBinDir with an explicit choice: dir "" searches.
func lookBinDir(dir string) (string, error) {
	if dir == "" {
		return FindBinDir()
	}
	if err := checkBinDir(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// tool returns the path of a PostgreSQL program (pg_basebackup, pg_ctl)
// for the server binaries in binDir: beside them, or beside the real
// postgres when binDir holds symlinks to a version's binaries only in part.
func tool(binDir, name string) string {
	p := filepath.Join(binDir, name)
	if isExecutable(p) {
		return p
	}
	if real, err := filepath.EvalSymlinks(filepath.Join(binDir, "postgres")); err == nil {
		if q := filepath.Join(filepath.Dir(real), name); isExecutable(q) {
			return q
		}
	}
	return p // the error names the path looked for
}
