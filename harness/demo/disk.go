package demo

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// diskSampleEvery is how often the demo measures the downloads directory.
// Each sample walks a few dozen files at most: the daemon deletes what it
// has hashed and listed.
const diskSampleEvery = 20 * time.Millisecond

// diskSampler measures the bytes under the downloads directory, in total and
// per account directory, and keeps the peaks: the figure that shows the
// daemon's download budget holds.
type diskSampler struct {
	dir string

	mu          sync.Mutex
	peak        int64
	peakAccount int64
}

func newDiskSampler(dir string) *diskSampler { return &diskSampler{dir: dir} }

// run samples until ctx ends, and once more then.
func (d *diskSampler) run(ctx context.Context) {
	t := time.NewTicker(diskSampleEvery)
	defer t.Stop()
	for {
		d.sample()
		select {
		case <-ctx.Done():
			d.sample()
			return
		case <-t.C:
		}
	}
}

func (d *diskSampler) sample() {
	perAccount := map[string]int64{}
	var total int64
	_ = filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			// Files come and go while we walk: skip what vanished.
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !e.Type().IsRegular() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		rel, err := filepath.Rel(d.dir, path)
		if err != nil {
			return nil
		}
		account, _, _ := strings.Cut(rel, string(filepath.Separator))
		perAccount[account] += info.Size()
		total += info.Size()
		return nil
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	d.peak = max(d.peak, total)
	for _, n := range perAccount {
		d.peakAccount = max(d.peakAccount, n)
	}
}

// peaks returns the most bytes seen at once in total and in one account's
// directory.
func (d *diskSampler) peaks() (total, account int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.peak, d.peakAccount
}
