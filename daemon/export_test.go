package daemon

import (
	"context"
	"time"

	"stashd/store"
	"stashd/tg"
)

// LeaseStore is what the lease loops need of the store.
type LeaseStore = leaseStore

// SetLeaseStore makes d's lease loops use ls (a wrapper that fails on
// demand) instead of the store.
func SetLeaseStore(d *Daemon, ls LeaseStore) { d.leases = ls }

// SetBeforeLostStop makes d call f, in the lease loop, after an account's
// lease is lost and before the account is stopped: what a resumed process
// may do in that moment is what the gate is for.
func SetBeforeLostStop(d *Daemon, f func(account string)) { d.beforeLostStop = f }

// AccountPaced returns the paced Telegram client of account's run, or nil.
func AccountPaced(d *Daemon, account string) *tg.Paced {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.accounts {
		if r.name == account {
			return r.paced
		}
	}
	return nil
}

// GateAt returns the lease gate of a tenure at epoch whose last renewal
// was sent at sent and keeps the lease for life.
func GateAt(epoch int64, sent time.Time, life time.Duration) func() error {
	return newHolding(epoch, sent, life).gate
}

// SetBacklogInterval makes d's accounts refresh the delivery backlog
// gauges every every (set before Prepare).
func SetBacklogInterval(d *Daemon, every time.Duration) { d.backlogEvery = every }

// DestPause is account from's Config.DestPause: how long before an
// account of d that could send to dest may do so.
func DestPause(d *Daemon, from string, dest tg.ChatID) time.Duration {
	return d.spread.pause(from, dest)
}

// SetSharedInterval makes d's accounts look every every at the chats they
// list that another account reads (set before Prepare).
func SetSharedInterval(d *Daemon, every time.Duration) { d.sharedEvery = every }

// SetNoReadRecheck makes d pass over an account found unable to read a
// source for every instead of noReadRecheck (set before Prepare).
func SetNoReadRecheck(d *Daemon, every time.Duration) { d.noReadRecheck = every }

// SetPickTimeout makes d bound the getChat calls of one pick by every
// instead of pickTimeout (set before Prepare).
func SetPickTimeout(d *Daemon, every time.Duration) { d.pickTimeout = every }

// ConfigFingerprint is the fingerprint and summary of account a under cfg,
// and ConfigDiff how one summary differs from another.
func ConfigFingerprint(cfg Config, a Account) store.AccountConfig { return configFingerprint(cfg, a) }
func ConfigDiff(summary, holders string) string                   { return configDiff(summary, holders) }

// ClientHold is clientHold: how long the account's TDLib client must not
// start under waits.
func ClientHold(ctx context.Context, st *store.Store, account string, waits []store.FloodWait) (time.Duration, error) {
	left, _, err := clientHold(ctx, st, account, waits)
	return left, err
}
