package ingest

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"
)

// HashParts must give the content hash of the catalogue (SHA-256 over the
// parts in order) and each part's own hash, for one part as for several.
func TestHashParts(t *testing.T) {
	dir := t.TempDir()
	parts := [][]byte{bytes.Repeat([]byte("a"), 300<<10), []byte("second part"), {}}
	var paths []string
	for i, b := range parts {
		p := filepath.Join(dir, string(rune('a'+i)))
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for n := 1; n <= len(parts); n++ {
		got, err := HashParts(paths[:n])
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(bytes.Join(parts[:n], nil))
		if !bytes.Equal(got.Content, want[:]) {
			t.Errorf("%d parts: content hash %x, want %x", n, got.Content, want)
		}
		for i := range n {
			ps := sha256.Sum256(parts[i])
			if !bytes.Equal(got.Parts[i], ps[:]) || got.Sizes[i] != int64(len(parts[i])) {
				t.Errorf("%d parts: part %d hash %x size %d", n, i, got.Parts[i], got.Sizes[i])
			}
		}
	}
	if _, err := HashParts([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Error("a missing file hashed without error")
	}
}
