package archive

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"stashd/archive/archivetest"
)

// BenchmarkListZip lists a 100,000-entry zip held in memory and reports
// entries listed per second.
func BenchmarkListZip(b *testing.B) {
	const n = 100_000
	var buf bytes.Buffer
	if err := archivetest.ZipMany(&buf, n, func(b []byte, i int) []byte { return fmt.Appendf(b, "dir/sub/file-%06d.txt", i) }); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		l, err := memList(context.Background(), FormatZip, Limits{}, data)
		if err != nil || len(l.Entries) != n {
			b.Fatalf("%d entries, %v", len(l.Entries), err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
