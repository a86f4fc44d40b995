package tdlib

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"stashd/internal/tdschema"
)

var (
	schemaOnce sync.Once
	schema     *tdschema.Schema
	schemaErr  error
)

// tdSchema is the td_api.tl of the go-tdlib module stashd builds with.
func tdSchema(t *testing.T) *tdschema.Schema {
	t.Helper()
	schemaOnce.Do(func() { schema, schemaErr = tdschema.Load() })
	if schemaErr != nil {
		t.Fatal(schemaErr)
	}
	return schema
}

// The fixtures are TDLib's output that the decoders are tested on: each
// must be an object TDLib 1.8.40 can write, whole (TDLib leaves out only
// what may be null), or the decoders are tested on what never arrives.
func TestFixturesFollowTheSchema(t *testing.T) {
	t.Parallel()
	s := tdSchema(t)
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CheckObject(b); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
}
