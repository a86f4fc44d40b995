package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/daemon"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// logoutRig is a daemon of accounts a and b, each with a source of its
// own and one shared destination, dialled the way serve dials: an account
// that is not logged in fails to start.
type logoutRig struct {
	w    *tgsim.World
	st   *store.Store
	d    *daemon.Daemon
	reg  *prometheus.Registry
	src  map[string]tg.ChatID
	dest tg.ChatID
	n    int
}

func newLogoutRig(t *testing.T, seed int64, before func(*tgsim.World)) *logoutRig {
	t.Helper()
	r := &logoutRig{st: openStore(t, poolConns), reg: prometheus.NewRegistry(), src: map[string]tg.ChatID{}}
	r.w = tgsim.NewWorld(tgsim.Config{Seed: seed, FilesDir: t.TempDir()})
	var accounts []daemon.Account
	for _, a := range []string{"a", "b"} {
		r.w.AddAccount(a, false)
		r.src[a] = r.w.AddChat(tg.KindChannel, "source of "+a, a)
		accounts = append(accounts, daemon.Account{Name: a, Sources: []tg.ChatID{r.src[a]}})
	}
	r.dest = r.w.AddChat(tg.KindChannel, "mirror", "a", "b")
	if before != nil {
		before(r.w)
	}
	r.d = daemon.New(daemon.Config{
		Accounts: accounts, Destinations: []tg.ChatID{r.dest}, Workers: 2, QueueCapacity: 16,
		LoginPoll: 100 * time.Millisecond, Registry: r.reg,
		Ingest: ingest.Config{SetSettle: 50 * time.Millisecond, SetMaxWait: time.Second},
	}, r.st, func(_ context.Context, account string) (tg.Client, error) {
		c, err := r.w.Dial(account, "")
		if err != nil {
			return nil, err
		}
		return c, nil
	})
	prepareAndRun(t, r.d)
	t.Cleanup(func() { r.d.Shutdown(context.Background()) })
	return r
}

// post posts a fresh archive in account's source.
func (r *logoutRig) post(account string) tg.MessageKey {
	r.n++
	data := archivetest.SevenZip([]archivetest.File{{Name: "f", Data: []byte(strings.Repeat("x", 100+r.n))}})
	return r.w.Post(r.src[account], 0, tgsim.Post{FileName: account + "-" + string(rune('a'+r.n%26)) + ".7z", Data: data}).Key()
}

// loggedInMetric returns stashd_account_logged_in{account}.
func loggedInMetric(t *testing.T, reg *prometheus.Registry, account string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "stashd_account_logged_in" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "account" && l.GetValue() == account {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func authOf(t *testing.T, st *store.Store, account string) store.AccountAuth {
	t.Helper()
	all, err := st.AccountAuths(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all {
		if a.Account == account {
			return a
		}
	}
	t.Fatalf("no login state recorded for account %s (have %+v)", account, all)
	return store.AccountAuth{}
}

// One of two accounts logged out remotely mid-run: only it stops (the
// daemon stays healthy and ready, the other keeps delivering), status
// says why, and it resumes by itself once logged in again.
func TestRemoteLogoutStopsOnlyThatAccount(t *testing.T) {
	t.Parallel()
	r := newLogoutRig(t, 61, nil)
	ctx := t.Context()
	waitHandled(t, r.st, r.post("a"))
	waitHandled(t, r.st, r.post("b"))
	if v := loggedInMetric(t, r.reg, "a"); v != 1 {
		t.Fatalf("stashd_account_logged_in{a} = %v before the logout, want 1", v)
	}

	r.w.LogOut("a")
	waitFor(t, "account a reported logged out", func() bool { return loggedInMetric(t, r.reg, "a") == 0 })
	for range 20 { // the watchdog's view while a stops: never unhealthy
		if err := r.d.Health(ctx); err != nil {
			t.Fatalf("health after a remote logout of one account: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.d.Ready(ctx); err != nil {
		t.Errorf("ready with one of two accounts logged out: %v", err)
	}
	a := authOf(t, r.st, "a")
	if a.LoggedIn || a.State != tg.AuthStateLoggingOut || !strings.Contains(a.Reason, "stashd login --account a") {
		t.Errorf("recorded state of a = %+v, want logged out by %s with the login hint", a, tg.AuthStateLoggingOut)
	}
	if loggedInMetric(t, r.reg, "b") != 1 || !authOf(t, r.st, "b").LoggedIn {
		t.Errorf("account b is not reported logged in")
	}
	waitHandled(t, r.st, r.post("b")) // b keeps delivering
	missed := r.post("a")             // waits for a

	r.w.LogIn("a")
	waitFor(t, "account a logged in again", func() bool { return loggedInMetric(t, r.reg, "a") == 1 })
	waitHandled(t, r.st, missed)
	waitHandled(t, r.st, r.post("a"))
	if !authOf(t, r.st, "a").LoggedIn {
		t.Errorf("account a resumed but its recorded state is not logged in")
	}
}

// An account that is not logged in at start is not started; the daemon
// runs the others, records why, and starts it once it is logged in.
func TestAccountNotLoggedInAtStartIsSkipped(t *testing.T) {
	t.Parallel()
	r := newLogoutRig(t, 62, func(w *tgsim.World) { w.LogOut("a") })
	ctx := t.Context()
	waitHandled(t, r.st, r.post("b"))
	if v := loggedInMetric(t, r.reg, "a"); v != 0 {
		t.Errorf("stashd_account_logged_in{a} = %v, want 0", v)
	}
	a := authOf(t, r.st, "a")
	if a.LoggedIn || a.State != tg.AuthStateWaitPhoneNumber || !strings.Contains(a.Reason, "stashd login --account a") {
		t.Errorf("recorded state of a = %+v, want not logged in, waiting for a phone number, with the login hint", a)
	}
	if err := r.d.Health(ctx); err != nil {
		t.Errorf("health: %v", err)
	}
	if err := r.d.Ready(ctx); err != nil {
		t.Errorf("ready with b running: %v", err)
	}
	key := r.post("a")
	r.w.LogIn("a")
	waitHandled(t, r.st, key)
}

// With every account logged out the daemon stays up, healthy but not
// ready, and says why.
func TestEveryAccountLoggedOutLeavesDaemonUpNotReady(t *testing.T) {
	t.Parallel()
	r := newLogoutRig(t, 63, func(w *tgsim.World) { w.LogOut("a"); w.LogOut("b") })
	ctx := t.Context()
	if err := r.d.Health(ctx); err != nil {
		t.Errorf("health: %v", err)
	}
	err := r.d.Ready(ctx)
	if err == nil || !strings.Contains(err.Error(), "no account is logged in") || !strings.Contains(err.Error(), "stashd login") {
		t.Errorf("ready = %v, want not ready because no account is logged in", err)
	}
	r.w.LogIn("b")
	waitFor(t, "ready once b is logged in", func() bool { return r.d.Ready(ctx) == nil })
}
