package store_test

import (
	"context"
	"errors"
	neturl "net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// openOn opens a second store on url (another daemon instance sharing the
// database), closed when the test ends.
func openOn(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// leasedToHost1 records chat as a source of account "acc" and has
// "host:1" take acc's lease on st.
func leasedToHost1(t *testing.T, st *store.Store, chat tg.ChatID) store.Acquired {
	t.Helper()
	ctx := t.Context()
	if err := st.EnsureSource(ctx, store.Source{ChatID: chat, Account: "acc"}); err != nil {
		t.Fatal(err)
	}
	first, ok, err := st.AcquireLease(ctx, "acc", "host:1", time.Minute, "")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	return first
}

// takenOverByHost2 lets the lease first expire (through a) and has
// "host:2" take acc over on b, at the next epoch.
func takenOverByHost2(t *testing.T, a, b *store.Store, first store.Acquired) store.Acquired {
	t.Helper()
	ctx := t.Context()
	if _, err := a.Pool().Exec(ctx, `UPDATE accounts SET lease_until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	second, ok, err := b.AcquireLease(ctx, "acc", "host:2", time.Minute, "")
	if err != nil || !ok || second.Epoch != first.Epoch+1 {
		t.Fatal(second, ok, err)
	}
	return second
}

// openWithSource opens a store on a fresh catalogue that records one
// source of account "acc", chat -100.
func openWithSource(t *testing.T) (*store.Store, tg.ChatID) {
	t.Helper()
	st := open(t)
	chat := tg.ChatID(-100)
	if err := st.EnsureSource(t.Context(), store.Source{ChatID: chat, Account: "acc"}); err != nil {
		t.Fatal(err)
	}
	return st, chat
}

// oldServerRecorded records in st's catalogue the identity of the server
// before a failover (the current one's, a timeline back) and returns it.
// It skips the test when the identity cannot be read.
func oldServerRecorded(t *testing.T, st *store.Store) store.DatabaseIdentity {
	t.Helper()
	ctx := t.Context()
	now, ok, err := st.ServerIdentity(ctx)
	if err != nil || !ok {
		t.Skip("the server's identity cannot be read", err)
	}
	old := store.DatabaseIdentity{SystemIdentifier: now.SystemIdentifier, Timeline: now.Timeline - 1}
	if _, err := st.Pool().Exec(ctx, `INSERT INTO database_identity (system_identifier, timeline) VALUES ($1, $2)`,
		old.SystemIdentifier, old.Timeline); err != nil {
		t.Fatal(err)
	}
	return old
}

// reconnectNoticing drops st's connections and pings, wanting the new
// connection to notice it reached another timeline.
func reconnectNoticing(t *testing.T, st *store.Store) {
	t.Helper()
	st.ResetConnections()
	if err := st.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !st.ServerChanged() {
		t.Fatal("a connection to another timeline was not noticed")
	}
}

// A catalogue that rewinds (a lagging standby promoted, a restore) brings
// an account's lease row back to an epoch an instance has since passed:
// the next acquisition hands that later epoch out again, to another owner.
// The instance that held it before the rewind, not yet told (its renewal
// is due later), must not write under the new owner's epoch.
func TestFenceRefusesAnEpochReusedAfterARewind(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	a, b := openOn(t, url), openOn(t, url)
	ctx := t.Context()
	chat := tg.ChatID(-100)
	first := leasedToHost1(t, a, chat)
	// The backup (or the standby) has the row as it stands now.
	var taken time.Time
	if err := a.Pool().QueryRow(ctx, `SELECT lease_taken_at FROM accounts WHERE name = 'acc'`).Scan(&taken); err != nil {
		t.Fatal(err)
	}
	// host:1 pauses past its lease; host:2 takes the account over.
	second := takenOverByHost2(t, a, b, first)
	staleB := store.WithFence(ctx, "acc", second.Epoch, nil)
	if err := b.AdvanceWatermark(staleB, chat, 10); err != nil {
		t.Fatal(err)
	}
	// The rewind: the row is host:1's again, at the first epoch, its
	// expiry still ahead.
	if _, err := a.Pool().Exec(ctx, `UPDATE accounts SET lease_owner = 'host:1', lease_epoch = $1,
		lease_until = now() + interval '1 minute', lease_taken_at = $2`, first.Epoch, taken); err != nil {
		t.Fatal(err)
	}
	// host:1 resumes, finds its deadline passed and takes its lease back.
	again, ok, err := a.AcquireLease(ctx, "acc", "host:1", time.Minute, "")
	if err != nil || !ok {
		t.Fatal(again, ok, err)
	}
	cur := store.WithFence(ctx, "acc", again.Epoch, nil)
	if err := a.AdvanceWatermark(cur, chat, 20); err != nil {
		t.Fatalf("the owner's write: %v", err)
	}
	// host:2 has not renewed yet: its fenced writes carry its epoch.
	if err := b.AdvanceWatermark(staleB, chat, 50); !errors.Is(err, store.ErrStaleEpoch) {
		t.Errorf("host:2's watermark at epoch %d, now host:1's at epoch %d: %v, want ErrStaleEpoch",
			second.Epoch, again.Epoch, err)
	}
	if _, err := b.RenewLease(ctx, "acc", "host:2", second.Epoch, time.Minute); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("host:2's renewal: %v, want ErrLeaseLost", err)
	}
}

// A failover under two running instances: the first to check the
// promoted server's identity records it, and the second, which ran on
// the old server too and has rewound watermarks and deliveries of its own
// to take back, must still be told that its catalogue may have rewound.
func TestEveryInstanceLearnsOfAFailover(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	a, b := openOn(t, url), openOn(t, url)
	ctx := t.Context()
	// Both ran on the old primary, whose identity the catalogue recorded.
	old := oldServerRecorded(t, a)
	store.SetServerSeen(a, old)
	store.SetServerSeen(b, old)
	// The standby is promoted: new connections reach it.
	for _, st := range []*store.Store{a, b} {
		reconnectNoticing(t, st)
	}
	if reason, err := a.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("first instance: %q, %v; want a rewind named", reason, err)
	}
	if reason, err := b.CheckIdentity(ctx); err != nil || reason == "" {
		t.Errorf("second instance, after the first recorded the promoted server: %q, %v; want a rewind named", reason, err)
	}
	// Told once: a later check of the same server names nothing.
	if reason, err := b.CheckIdentity(ctx); err != nil || reason != "" {
		t.Errorf("second instance's next check: %q, %v; want nothing", reason, err)
	}
}

// A standby promoted under a running instance has not seen the last
// packages the old primary catalogued, and its sequence hands their ids out
// again. The instance may still hold those ids (a due delivery read before
// the failover): a new package must not take one of them.
func TestPackageIDsAreNotReusedAfterAFailover(t *testing.T) {
	t.Parallel()
	st := open(t)
	now, lost := loseLastPackage(t, st)
	store.SetServerSeen(st, store.DatabaseIdentity{SystemIdentifier: now.SystemIdentifier, Timeline: now.Timeline - 1})
	st.ResetConnections()
	fresh := onePartPackage(t, st, "new", 3, 3<<20)
	if fresh <= lost {
		t.Errorf("a package catalogued after the failover took id %d; the old primary gave out ids up to %d", fresh, lost)
	}
}

// The owner that took an epoch handed out again after a rewind may release
// it (a clean stop) while the instance that held that epoch before the
// rewind has not yet learnt it lost the lease: the released row names no
// owner, and its epoch must still refuse the other owner's writes, while
// the releasing owner's last writes and an ownerless fence (the CLI) pass.
func TestFenceRefusesAReusedEpochOnceReleased(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	a, b := openOn(t, url), openOn(t, url)
	ctx := t.Context()
	chat := tg.ChatID(-100)
	first := leasedToHost1(t, a, chat)
	second := takenOverByHost2(t, a, b, first)
	staleB := store.WithFence(ctx, "acc", second.Epoch, nil)
	// The rewind brings the row back to host:1's epoch, lapsed; host:1
	// takes the next epoch, host:2's, and stops cleanly.
	if _, err := a.Pool().Exec(ctx, `UPDATE accounts SET lease_owner = 'host:1', lease_epoch = $1,
		lease_until = now() - interval '1 second'`, first.Epoch); err != nil {
		t.Fatal(err)
	}
	again, ok, err := a.AcquireLease(ctx, "acc", "host:1", time.Minute, "")
	if err != nil || !ok || again.Epoch != second.Epoch {
		t.Fatal(again, ok, err)
	}
	if err := a.ReleaseLease(ctx, "acc", "host:1", again.Epoch); err != nil {
		t.Fatal(err)
	}
	if err := b.AdvanceWatermark(staleB, chat, 50); !errors.Is(err, store.ErrStaleEpoch) {
		t.Errorf("host:2's watermark at epoch %d, released by host:1 which took it after the rewind: %v, want ErrStaleEpoch",
			second.Epoch, err)
	}
	if err := a.AdvanceWatermark(store.WithFence(ctx, "acc", again.Epoch, nil), chat, 20); err != nil {
		t.Errorf("host:1's last write after its release: %v", err)
	}
	cli := openOn(t, url)
	if err := cli.AdvanceWatermark(store.WithFence(ctx, "acc", again.Epoch, nil), chat, 30); err != nil {
		t.Errorf("an ownerless fence at the current epoch: %v", err)
	}
}

// The first connection to a promoted server may not be able to move the
// package ids (the server still read-only as it is promoted): the next
// connection, once it takes writes, moves them before a package is written.
func TestPackageIDsMoveOnceTheNewServerTakesWrites(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	st := openOn(t, url)
	ctx := t.Context()
	now, lost := loseLastPackage(t, st)
	readOnly := func(on bool) {
		t.Helper()
		sql := `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$`
		if !on {
			sql = `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I RESET default_transaction_read_only', current_database()); END $$`
		}
		c, err := st.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		if _, err := c.Exec(ctx, `SET default_transaction_read_only = off`); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	readOnly(true)
	// A connection that started before the server turned read-only (the
	// lease pool keeps one open in the background) must finish its start,
	// and go, before the change of server is staged: it could write.
	st.ResetConnections()
	time.Sleep(500 * time.Millisecond)
	st.ResetConnections()
	store.SetServerSeen(st, store.DatabaseIdentity{SystemIdentifier: now.SystemIdentifier, Timeline: now.Timeline - 1})
	reconnectNoticing(t, st)
	var seq int64
	if err := st.Pool().QueryRow(ctx, `SELECT last_value FROM packages_id_seq`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	if seq >= lost {
		t.Fatalf("a read-only server's sequence moved to %d", seq)
	}
	readOnly(false)
	st.ResetConnections()
	fresh := onePartPackage(t, st, "new", 3, 3<<20)
	if fresh <= lost {
		t.Errorf("a package catalogued once the new server took writes took id %d; the old primary gave out ids up to %d", fresh, lost)
	}
}

// loseLastPackage catalogues two packages and takes the last one back out
// with the sequence's step past it, as a promoted standby lacks them. It
// returns the server's identity and the lost package's id, and skips the
// test when the identity cannot be read.
func loseLastPackage(t *testing.T, st *store.Store) (store.DatabaseIdentity, int64) {
	t.Helper()
	ctx := t.Context()
	now, ok, err := st.ServerIdentity(ctx)
	if err != nil || !ok {
		t.Skip("the server's identity cannot be read", err)
	}
	onePartPackage(t, st, "kept", 1, 1<<20)
	lost := onePartPackage(t, st, "lost", 2, 2<<20)
	if _, err := st.Pool().Exec(ctx, `DELETE FROM packages WHERE id = $1`, lost); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, `SELECT setval('packages_id_seq', $1)`, lost-1); err != nil {
		t.Fatal(err)
	}
	return now, lost
}

// A failover is noticed on a new connection, and the delivery about to go
// asks for the identity check (ServerChanged, then CheckIdentity). A check
// that fails (the promoted server still settling) must leave the change to
// be told again, or the next delivery's hold finds nothing changed and
// sends before the rewind was named.
func TestAFailedIdentityCheckKeepsTheFailoverToTell(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	st := openOn(t, url)
	ctx := t.Context()
	old := oldServerRecorded(t, st)
	store.SetServerSeen(st, old)
	reconnectNoticing(t, st)
	// The check cannot read the catalogue's record in time.
	locker, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Rollback(context.Background()) }()
	if _, err := locker.Exec(ctx, `LOCK TABLE database_identity IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	reason, err := st.CheckIdentity(short)
	cancel()
	if err == nil {
		t.Fatalf("the check went through a locked record: %q", reason)
	}
	if err := locker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.ServerChanged() {
		t.Error("after a failed check the change is no longer told: the next delivery would go unheld")
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Errorf("the next check: %q, %v; want the rewind named", reason, err)
	}
}

// An instance that starts on the promoted standby while another, which ran
// on the old primary, has not reconnected yet: the new instance's packages
// must not take the ids the old primary gave out, which the other still
// holds (a due delivery read before the failover). The new instance's
// connections never saw another server; the catalogue's record of the old
// one tells it.
func TestPackageIDsOfAnInstanceStartedAfterAFailoverAreNotReused(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	running := openOn(t, url)
	ctx := t.Context()
	if reason, err := running.CheckIdentity(ctx); err != nil || reason != "" {
		t.Fatalf("first check: %q, %v", reason, err)
	}
	_, lost := loseLastPackage(t, running)
	// The promoted standby holds the old primary's record, of its timeline.
	if _, err := running.Pool().Exec(ctx, `UPDATE database_identity SET timeline = timeline - 1`); err != nil {
		t.Fatal(err)
	}
	started := openOn(t, url)
	if fresh := onePartPackage(t, started, "new", 3, 3<<20); fresh <= lost {
		t.Errorf("a package catalogued by an instance started after the failover took id %d; the old primary gave out ids up to %d", fresh, lost)
	}
}

// A role that may write packages but not set their sequence (UPDATE on it)
// cannot move the ids on after a failover: the store tells that failure,
// once, for the daemon to log, rather than leaving it silent.
func TestPackageIDMoveThatIsRefusedIsTold(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	admin := openOn(t, url)
	ctx := t.Context()
	role, st := openAsRole(t, admin, url, "writer_", " IN ROLE pg_monitor", "USAGE")
	now, ok, err := st.ServerIdentity(ctx)
	if err != nil || !ok {
		t.Skip("the server's identity cannot be read", err)
	}
	if err := st.IDMoveFailure(); err != nil {
		t.Fatalf("before any change of server: %v", err)
	}
	store.SetServerSeen(st, store.DatabaseIdentity{SystemIdentifier: now.SystemIdentifier, Timeline: now.Timeline - 1})
	st.ResetConnections()
	if _, err := st.Pool().Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	err = st.IDMoveFailure()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("after a refused move: %v; want the permission error", err)
	}
	if err := st.IDMoveFailure(); err != nil {
		t.Errorf("told twice: %v", err)
	}
	// Refused again, then granted: a move that went through leaves no
	// failure to tell.
	st.ResetConnections()
	if _, err := st.Pool().Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Pool().Exec(ctx, "GRANT UPDATE ON ALL SEQUENCES IN SCHEMA public TO "+role); err != nil {
		t.Fatal(err)
	}
	st.ResetConnections()
	if _, err := st.Pool().Exec(ctx, `SELECT 1`); err != nil {
		t.Fatal(err)
	}
	if err := st.IDMoveFailure(); err != nil {
		t.Errorf("after the ids moved on: %v; want nothing to tell", err)
	}
}

// openAsRole creates a login role named prefix and the test database's
// name (with options after LOGIN), which may read and write the
// catalogue's tables and has sequences (privileges) on its sequences;
// it drops the role when the test ends, and returns the role's name and a
// store connected as it.
func openAsRole(t *testing.T, admin *store.Store, url, prefix, options, sequences string) (string, *store.Store) {
	t.Helper()
	var db string
	if err := admin.Pool().QueryRow(t.Context(), `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	role := prefix + db
	for _, sql := range []string{
		"CREATE ROLE " + role + " LOGIN" + options,
		"GRANT USAGE ON SCHEMA public TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO " + role,
		"GRANT " + sequences + " ON ALL SEQUENCES IN SCHEMA public TO " + role,
	} {
		if _, err := admin.Pool().Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, sql := range []string{"REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM " + role,
			"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM " + role, "REVOKE ALL ON SCHEMA public FROM " + role, "DROP ROLE " + role} {
			_, _ = admin.Pool().Exec(context.Background(), sql)
		}
	})
	return role, openOn(t, roleURL(t, url, role))
}

// roleURL returns connStr connecting as user.
func roleURL(t *testing.T, connStr, user string) string {
	t.Helper()
	if strings.HasPrefix(connStr, "postgres://") || strings.HasPrefix(connStr, "postgresql://") {
		u, err := neturl.Parse(connStr)
		if err != nil {
			t.Fatal(err)
		}
		u.User = neturl.User(user)
		return u.String()
	}
	return connStr + " user=" + user
}

// A standby promoted under a running instance lacks the last messages the
// old primary catalogued, while the instance's listener and catch-up hold
// watermarks past them. Written before the identity check names the
// failover, those watermarks would be what the check's reload of the
// sources reads back, and the messages the new server lacks would never be
// read again: the source's state waits for the check.
func TestWatermarksWaitForTheCheckOfAFailover(t *testing.T) {
	t.Parallel()
	st, chat := openWithSource(t)
	ctx := t.Context()
	if err := st.SaveSourceState(ctx, chat, false, "", 5, 5); err != nil {
		t.Fatal(err)
	}
	store.SetServerSeen(st, oldServerRecorded(t, st))
	reconnectNoticing(t, st)
	watermark := func() int64 {
		t.Helper()
		src, err := st.GetSource(ctx, chat)
		if err != nil {
			t.Fatal(err)
		}
		return src.Watermark
	}
	err := st.SaveSourceState(ctx, chat, false, "", 9, 9)
	if aerr := st.AdvanceWatermark(ctx, chat, 8); err == nil || aerr == nil || watermark() != 5 {
		t.Fatalf("before the failover is checked: state written %v, watermark advanced %v, watermark %d; want both refused, 5",
			err, aerr, watermark())
	}
	if !errors.Is(err, store.ErrRewindUnchecked) {
		t.Errorf("the refusal: %v, want ErrRewindUnchecked", err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("the check: %q, %v; want the failover named", reason, err)
	}
	if err := st.SaveSourceState(ctx, chat, false, "", 9, 9); err != nil || watermark() != 9 {
		t.Fatalf("after the check: %v, watermark %d; want 9", err, watermark())
	}
}

// A dump restored in place keeps the server and the connections; only the
// catalogue's table OID tells it. The sources' state waits for the check
// that names it as after a failover, left as the dump has it.
func TestWatermarksWaitForTheCheckOfADumpRestoredInPlace(t *testing.T) {
	t.Parallel()
	st, chat := openWithSource(t)
	ctx := t.Context()
	if _, err := st.CheckIdentity(ctx); err != nil {
		t.Fatal(err)
	}
	// As pg_restore leaves it: the row names the dumped table's OID.
	if _, err := st.Pool().Exec(ctx, `UPDATE database_identity SET catalogue_oid = catalogue_oid + 1`); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveSourceState(ctx, chat, false, "", 9, 9); err != nil {
		t.Fatal(err)
	}
	if err := st.AdvanceWatermark(ctx, chat, 8); err != nil {
		t.Fatal(err)
	}
	src, err := st.GetSource(ctx, chat)
	if err != nil || src.Watermark != 0 {
		t.Fatalf("before the restore is checked the watermark is %d (%v), want 0 as restored", src.Watermark, err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("the check: %q, %v; want the restore named", reason, err)
	}
	if err := st.SaveSourceState(ctx, chat, false, "", 9, 9); err != nil {
		t.Fatal(err)
	}
	if src, err := st.GetSource(ctx, chat); err != nil || src.Watermark != 9 {
		t.Fatalf("after the check the watermark is %d (%v), want 9", src.Watermark, err)
	}
}

// A source's state learnt before a rewind the check names (a listener's
// flush that read it before, a scan under way) is refused after the check
// too: written then, it would carry the watermark past what the catalogue
// forgot, where the reload after the check reads it. A state read after
// the check is written.
func TestStateLearntBeforeARewindIsRefusedAfterItsCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		before, rewind func(t *testing.T, st *store.Store)
	}{
		{"failover", func(t *testing.T, st *store.Store) {
			store.SetServerSeen(st, oldServerRecorded(t, st))
		}, func(t *testing.T, st *store.Store) {
			reconnectNoticing(t, st)
		}},
		{"dump restored in place", func(t *testing.T, st *store.Store) {
			if _, err := st.CheckIdentity(t.Context()); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, st *store.Store) {
			if _, err := st.Pool().Exec(t.Context(), `UPDATE database_identity SET catalogue_oid = catalogue_oid + 1`); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st, chat := openWithSource(t)
			ctx := t.Context()
			tc.before(t, st)
			before, err := st.GetSource(ctx, chat)
			if err != nil {
				t.Fatal(err)
			}
			tc.rewind(t, st)
			if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
				t.Fatalf("the check: %q, %v; want the rewind named", reason, err)
			}
			learnt := store.WithEra(ctx, before.Era)
			err = st.SaveSourceState(learnt, chat, false, "", 9, 9)
			if aerr := st.AdvanceWatermark(learnt, chat, 8); !errors.Is(err, store.ErrRewound) || !errors.Is(aerr, store.ErrRewound) {
				t.Errorf("a state read before the rewind, after its check: written %v, advanced %v; want both ErrRewound", err, aerr)
			}
			after, err := st.GetSource(ctx, chat)
			if err != nil || after.Watermark != 0 {
				t.Fatalf("watermark %d (%v), want 0 as the rewound catalogue has it", after.Watermark, err)
			}
			if err := st.SaveSourceState(store.WithEra(ctx, after.Era), chat, false, "", 9, 9); err != nil {
				t.Fatalf("a state read after the check: %v", err)
			}
		})
	}
}

// A role that may not read the control file (a managed service's) cannot
// read the server's system identifier, but any role reads its timeline,
// which a promoted standby changes: a failover under a running instance
// must still be noticed on the first connection to the promoted server.
func TestFailoverNoticedByARoleThatCannotReadTheControlFile(t *testing.T) {
	t.Parallel()
	url := pgtest.New(t)
	admin := openOn(t, url)
	ctx := t.Context()
	now, ok, err := admin.ServerIdentity(ctx)
	if err != nil || !ok {
		t.Skip("the server's identity cannot be read", err)
	}
	// Functions are the database's own: the revocation stays in it.
	if _, err := admin.Pool().Exec(ctx, "REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC"); err != nil {
		t.Fatal(err)
	}
	_, st := openAsRole(t, admin, url, "monitorless_", "", "USAGE, UPDATE")
	if reason, err := st.CheckIdentity(ctx); err != nil || reason != "" {
		t.Fatalf("the first check: %q, %v; want it recorded", reason, err)
	}
	st.ResetConnections()
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if st.ServerChanged() {
		t.Fatal("a new connection to the same server was taken for another server")
	}
	store.SetServerSeen(st, store.DatabaseIdentity{SystemIdentifier: now.SystemIdentifier, Timeline: now.Timeline - 1})
	st.ResetConnections()
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if !st.ServerChanged() {
		t.Fatal("a connection to another timeline was not noticed by a role that cannot read the control file")
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason == "" {
		t.Fatalf("the check after the failover: %q, %v; want the failover named", reason, err)
	}
	if reason, err := st.CheckIdentity(ctx); err != nil || reason != "" {
		t.Errorf("the next check of the same server: %q, %v; want nothing", reason, err)
	}
}
