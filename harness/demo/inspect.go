package demo

import (
	"context"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// Settled is the demo's world once the pipeline has settled, for
// Options.Inspect: the accounts with the sources each watches and the
// destinations, exactly as the demo's daemon is configured with them.
type Settled struct {
	World    *tgsim.World
	Accounts []string
	// Sources are the chats each account watches.
	Sources      map[string][]tg.ChatID
	Destinations []tg.ChatID
	// Topics holds the destinations a route delivers into by topic name
	// (topic = "same"): the sending account must be able to create topics.
	Topics map[tg.ChatID]bool
	// DatabaseURL is the demo's catalogue; FilesDir where downloads go;
	// DownloadBudget each account's budget in bytes.
	DatabaseURL    string
	FilesDir       string
	DownloadBudget int64
}

// settled describes the runner's world for Inspect.
func (r *runner) settled() Settled {
	s := Settled{World: r.world, Accounts: r.gen.Accounts(), Sources: map[string][]tg.ChatID{},
		Topics: map[tg.ChatID]bool{}, DatabaseURL: r.o.DatabaseURL, FilesDir: r.o.FilesDir, DownloadBudget: r.o.DownloadBudget}
	for _, src := range r.gen.Sources() {
		s.Sources[src.Account] = append(s.Sources[src.Account], src.Chat)
	}
	s.Destinations = r.gen.Destinations()
	for _, rt := range r.routes.Routes() {
		for i, d := range rt.Destinations {
			if i < len(rt.Topics) && rt.Topics[i].Same {
				s.Topics[d] = true
			}
		}
	}
	return s
}

// pendingWork is the work the catalogue still holds for the pipeline.
type pendingWork struct{ parts, letters, deliveries int }

func (p pendingWork) total() int { return p.parts + p.letters + p.deliveries }

func (r *runner) pendingAndCount(ctx context.Context) (p pendingWork, count int, err error) {
	// A dead letter the retry loop will take again is work still pending,
	// but for an incomplete set's: it waits for a part that may never come
	// (a late part brings its set back at once).
	err = r.st.Pool().QueryRow(ctx, `SELECT
		(SELECT count(*) FROM source_messages WHERE outcome = 'part_pending'),
		(SELECT count(*) FROM dead_letters WHERE state = 'pending' AND next_attempt_at IS NOT NULL
			AND error_class <> 'incomplete_set'),
		-- Queued deliveries are work still pending, but for those a
		-- route's window holds; one put off after a failure (a flood
		-- wait, a refused send) is pending whatever its route.
		(SELECT count(*) FROM waiting_deliveries WHERE route = '' OR opens_at <= now() OR attempts > 0),
		(SELECT count(*) FROM source_messages)`).Scan(&p.parts, &p.letters, &p.deliveries, &count)
	return p, count, err
}
