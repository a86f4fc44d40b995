// Package bench measures every performance goal of stashd side by side with
// its baseline, in the same run, on the Telegram simulator and a private
// PostgreSQL: API economy against the polling and skip-rule schedulers of
// the seed, ingest against raw inserts, hashing against crypto/sha256,
// latency under load, catch-up under Telegram's request limit, memory under
// a huge backlog and scaling with accounts. It backs `stashd bench`.
//
// It builds the daemon exactly as serve does, with only the Telegram client
// swapped for the simulator. The baseline schedulers it contains exist only
// to be measured; nothing else may use them. It owns the databases it
// creates (named stashd_bench_*), which it drops and recreates.
package bench
