package tgsim

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// createFree makes its missing directory private, skips the names taken
// (another instance's downloads), creates the first free one empty,
// private and open for writing, and says so when every name is taken.
func TestCreateFreeTakesTheFirstFreeName(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "temp")
	name := func(i int) string { return "7_" + strconv.Itoa(i) }
	first, err := createFree(dir, 3, name)
	if err != nil {
		t.Fatalf("createFree in a missing directory: %v", err)
	}
	first.Close()
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("directory made: %v, %v; want mode 0700", st, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name(1)), []byte("another's"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := createFree(dir, 3, name)
	if err != nil {
		t.Fatalf("createFree with two names taken: %v", err)
	}
	if f.Name() != filepath.Join(dir, name(2)) {
		t.Errorf("created %s; want %s, the first free name", f.Name(), name(2))
	}
	if _, err := f.WriteString("data"); err != nil {
		t.Errorf("write through the descriptor: %v", err)
	}
	f.Close()
	st, err := os.Stat(filepath.Join(dir, name(2)))
	if err != nil || st.Mode().Perm() != 0o600 || st.Size() != 4 {
		t.Errorf("file created: %v, %v; want mode 0600 holding what was written", st, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, name(1))); string(got) != "another's" {
		t.Errorf("a taken file now holds %q", got)
	}
	if _, err := createFree(dir, 3, name); !errors.Is(err, errNamesTaken) {
		t.Errorf("createFree with every name taken: %v; want errNamesTaken", err)
	}
}
