package bench

import (
	"context"
	"fmt"
	"time"

	"stashd/archive/archivetest"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// multipartSends measures the sends a multipart package costs: sets of 2
// to 10 RAR volumes (x.part1.rar … x.partN.rar, the sizes in turn, as
// Telegram's album allows up to ten documents) posted in one channel,
// mirrored to one destination, and the send requests the simulator
// accepted counted once every delivery has settled. It returns sends per
// part.
func (r *runner) multipartSends(ctx context.Context) (spp float64, sets, parts int, err error) {
	sets = 40
	if r.o.Quick {
		sets = 9
	}
	e, err := r.newEnv(ctx, "multipart", 1, tgsim.Config{Seed: 3})
	if err != nil {
		return 0, 0, 0, err
	}
	defer e.close(ctx)
	src := e.addSource(0, tg.KindChannel, "sets")
	for n := range sets {
		size := 2 + n%9
		parts += size
		vols := archivetest.RarVolumes([]archivetest.File{{Name: fmt.Sprintf("dir/set-%d.bin", n), Data: fmt.Appendf(nil, "set %d payload, long enough to span volumes", n)}}, size)
		for i, v := range vols {
			e.world.Post(src, 0, tgsim.Post{FileName: fmt.Sprintf("set-%d.part%d.rar", n, i+1), Data: v})
		}
	}
	d, err := e.start(ctx, e.daemonConfig(4, 0), nil)
	if err != nil {
		return 0, 0, 0, err
	}
	defer d.Shutdown(context.Background())
	if got, err := e.waitCount(ctx, countPackages, sets, 2*time.Minute); err != nil {
		return 0, 0, 0, err
	} else if got < sets {
		return 0, 0, 0, fmt.Errorf("multipart: catalogued %d of %d sets", got, sets)
	}
	// Settled: no delivery left to send, and no send for a while.
	deadline := time.Now().Add(2 * time.Minute)
	last, still := -1, time.Now()
	for {
		open, err := e.count(ctx, `SELECT count(*) FROM deliveries WHERE state = 'intent'`)
		if err != nil {
			return 0, 0, 0, err
		}
		n := sendRequests(e.world.Sends())
		if n != last {
			last, still = n, time.Now()
		}
		if open == 0 && n > 0 && time.Since(still) > time.Second {
			break
		}
		if time.Now().After(deadline) {
			return 0, 0, 0, fmt.Errorf("multipart: deliveries did not settle (%d open, %d sends)", open, n)
		}
		select {
		case <-ctx.Done():
			return 0, 0, 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return float64(last) / float64(parts), sets, parts, nil
}

// sendRequests counts the requests that made sends: one per lone message,
// one per album.
func sendRequests(sends []tgsim.SendRecord) int {
	n := 0
	albums := map[int64]bool{}
	for _, s := range sends {
		switch {
		case s.Album == 0:
			n++
		case !albums[s.Album]:
			albums[s.Album] = true
			n++
		}
	}
	return n
}
