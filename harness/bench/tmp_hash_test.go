package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"stashd/archive"
	"stashd/ingest"
)

func TestTmpHash2(t *testing.T) {
	ctx := context.Background()
	for _, f := range []archive.Format{archive.FormatTarGz, archive.FormatTarXz, archive.FormatTarZst} {
		path := "/tmp/perf-hashfiles/data." + string(f)
		if _, err := os.Stat(path); err != nil {
			os.MkdirAll("/tmp/perf-hashfiles", 0o700)
			if err := writeArchive(path, f, 64<<20); err != nil {
				t.Fatal(err)
			}
		}
		best := func(fn func() error) time.Duration {
			b := time.Duration(math.MaxInt64)
			for range 3 {
				d, err := timed(fn)
				if err != nil {
					t.Fatal(err)
				}
				b = min(b, d)
			}
			return b
		}
		sha := best(func() error { return rawSHA256(path) })
		dec := best(func() error { return decompress(path, f) })
		lst := best(func() error { _, err := archive.List(ctx, f, []string{path}, archive.Limits{}); return err })
		seen := best(func() error {
			_, _, err := archive.ListSeeing(ctx, f, []string{path}, archive.Limits{}, func([]byte) {})
			return err
		})
		hl := best(func() error { _, _, le, err := ingest.HashList(ctx, f, []string{path}, archive.Limits{}); return cmpOr(err, le) })
		fmt.Printf("%s sha %v dec %v list %v listseeing %v hashlist %v\n", f, sha, dec, lst, seen, hl)
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
