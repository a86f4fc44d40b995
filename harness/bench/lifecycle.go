package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// rawLifecycle is the ingest item's third baseline: the writes the
// pipeline's design makes for a package, as plain statements with no
// daemon, no Telegram and no archive around them. The per-package raw
// transactions write a package's final rows once; the pipeline cannot,
// because its promises need rows on the way, each committed before the
// step it guards. Here a package takes four transactions, each one batch:
//
//  1. the message's ingest lock (a commit that does not wait for the WAL
//     flush, as the daemon takes it);
//  2. the catalogue rows and the delivery's queue row, with the lock's
//     release;
//  3. the delivery's lock and its intent, durable: they guard the send;
//  4. the sent record, with the queue row's and the lock's deletion.
//
// They run over 4 connections, as the raw transactions do. The pipeline
// makes the same writes, through the group committer, and adds its own
// work: the looks that ride with its locks, the download, hash and listing,
// and the simulator in the bench's process. Its ratio to this baseline
// shows what that work costs, over the writes exactly-once needs.
func (r *runner) rawLifecycle(ctx context.Context, cpu *cpuMeter, tables []tableRows, n int) (float64, cpuUse, error) {
	var used cpuUse
	st, err := r.rawDatabase(ctx, "raw_lifecycle")
	if err != nil {
		return 0, used, err
	}
	defer r.dropDatabase(ctx, "raw_lifecycle")
	defer st.Close()
	pool := st.Pool()
	if _, err := pool.Exec(ctx, `INSERT INTO accounts (name, lease_epoch) VALUES ('raw', 1)`); err != nil {
		return 0, used, fmt.Errorf("raw lifecycle: account: %w", err)
	}
	steps, err := lifecycleSteps(tables)
	if err != nil {
		return 0, used, err
	}
	ids := make(chan int64)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		failure error
	)
	start, cpu0 := time.Now(), cpu.sample()
	for range 4 {
		wg.Go(func() {
			for id := range ids {
				for i, b := range steps(id) {
					if b.Len() == 0 {
						continue
					}
					err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
					if err != nil {
						mu.Lock()
						failure = fmt.Errorf("raw lifecycle: package %d, step %d: %w", id, i+1, err)
						mu.Unlock()
						break
					}
				}
			}
		})
	}
	for _, row := range tables[0].rows {
		ids <- row[0].(int64)
	}
	close(ids)
	wg.Wait()
	elapsed := time.Since(start)
	used = cpu.cpuPerPackage(cpu0, cpu.sample(), n, elapsed, "client")
	if failure != nil {
		return 0, used, failure
	}
	return float64(n) / elapsed.Seconds(), used, nil
}

// lifecycleSteps returns, for a package id, the batches of rawLifecycle's
// four steps, built from the rows the pipeline wrote (tables, as
// readCatalogue returns them).
func lifecycleSteps(tables []tableRows) (func(id int64) []*pgx.Batch, error) {
	byName := map[string]tableRows{}
	for _, t := range tables {
		byName[t.name] = t
	}
	col := func(table, name string) (int, error) {
		if i := slices.Index(byName[table].cols, name); i >= 0 {
			return i, nil
		}
		return 0, fmt.Errorf("raw lifecycle: %s has no column %s", table, name)
	}
	var idx struct{ uid, partChat, partMsg, state, destMsg, sentAt, dest, part, account, fenceAcc, fenceEpoch int }
	var err error
	for _, c := range []struct {
		to          *int
		table, name string
	}{
		{&idx.uid, "remote_files", "unique_id"},
		{&idx.partChat, "package_parts", "source_chat_id"}, {&idx.partMsg, "package_parts", "source_message_id"},
		{&idx.state, "deliveries", "state"}, {&idx.destMsg, "deliveries", "dest_message_id"},
		{&idx.sentAt, "deliveries", "sent_at"}, {&idx.dest, "deliveries", "destination_chat_id"},
		{&idx.part, "deliveries", "part_idx"},
		{&idx.account, "deliveries", "account"},
		{&idx.fenceAcc, "deliveries", "fence_account"}, {&idx.fenceEpoch, "deliveries", "fence_epoch"},
	} {
		if *c.to, err = col(c.table, c.name); err != nil {
			return nil, err
		}
	}
	inserts := map[string]string{}
	for _, t := range tables {
		inserts[t.name] = insertSQL(t.name, t.cols)
	}
	const (
		lock    = `INSERT INTO package_locks (name, owner, until) VALUES ($1, 'raw', now() + interval '1 minute')`
		unlock  = `DELETE FROM package_locks WHERE name = $1 AND owner = 'raw'`
		waiting = `INSERT INTO waiting_deliveries (package_id, destination_chat_id, account, route, opens_at,
			source_chat_id, source_topic_id, message_ids, part_count) VALUES ($1, $2, $3, 'default', now(), $4, 0, $5, $6)`
		sent = `UPDATE deliveries SET state = 'sent', dest_message_id = $3, sent_at = now(), fence_account = 'raw', fence_epoch = 1
			WHERE package_id = $1 AND destination_chat_id = $2 AND part_idx = $4`
		cleared = `DELETE FROM waiting_deliveries WHERE package_id = $1 AND destination_chat_id = $2`
	)
	return func(id int64) []*pgx.Batch {
		parts, dels := byName["package_parts"].byPkg[id], byName["deliveries"].byPkg[id]
		uids := byName["remote_files"].byPkg[id]
		name := fmt.Sprintf("u:%d", id)
		if len(uids) > 0 {
			name = fmt.Sprint("u:", uids[0][idx.uid])
		}
		var chat any
		msgs := make([]int64, 0, len(parts))
		for _, p := range parts {
			chat = p[idx.partChat]
			msgs = append(msgs, p[idx.partMsg].(int64))
		}

		ingestLock := &pgx.Batch{}
		ingestLock.Queue("SET LOCAL synchronous_commit TO off")
		ingestLock.Queue(lock, name)

		catalogue := &pgx.Batch{}
		for _, t := range tables {
			if t.name == "deliveries" {
				continue
			}
			for _, row := range t.byPkg[id] {
				catalogue.Queue(inserts[t.name], row...)
			}
		}
		dests := map[any]bool{}
		intent, done := &pgx.Batch{}, &pgx.Batch{}
		for _, d := range dels {
			dest := d[idx.dest]
			dlock := fmt.Sprintf("d:%d:%v", id, dest)
			if !dests[dest] {
				dests[dest] = true
				catalogue.Queue(waiting, id, dest, d[idx.account], chat, msgs, len(parts))
				intent.Queue(lock, dlock)
			}
			row := slices.Clone(d)
			row[idx.state], row[idx.destMsg], row[idx.sentAt] = "intent", nil, nil
			row[idx.fenceAcc], row[idx.fenceEpoch] = "raw", int64(1)
			intent.Queue(inserts["deliveries"], row...)
			done.Queue(sent, id, dest, d[idx.destMsg], d[idx.part])
		}
		for dest := range dests {
			done.Queue(cleared, id, dest)
			done.Queue(unlock, fmt.Sprintf("d:%d:%v", id, dest))
		}
		catalogue.Queue(unlock, name)
		return []*pgx.Batch{ingestLock, catalogue, intent, done}
	}, nil
}
