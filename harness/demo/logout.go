package demo

import (
	"context"
	"time"

	"stashd/internal/service"
)

// logouts logs LogoutAccounts accounts out remotely a third of the way
// through publishing (their sessions terminated, as from another device)
// and logs them in again at two thirds: the daemon stops each alone and
// resumes it without a restart. It returns when both are done or ctx
// ends (the accounts are logged in again either way).
func (r *runner) logouts(ctx context.Context) {
	accounts := r.gen.Accounts()
	n := min(r.o.LogoutAccounts, len(accounts))
	out := accounts[len(accounts)-n:]
	defer r.logBackIn(out)
	if !service.Sleep(ctx, r.o.Duration/3) {
		return
	}
	for _, a := range out {
		r.log.Info("demo: logging the account out remotely", "account", a)
		r.world.LogOut(a)
	}
	service.Sleep(ctx, r.o.Duration/3)
}

// logBackIn logs accounts in again and waits until the daemon runs each
// of them again, so that the audit sees their work done.
func (r *runner) logBackIn(accounts []string) {
	for _, a := range accounts {
		if r.world.LoggedOutNow(a) {
			r.log.Info("demo: logging the account in again", "account", a)
			r.world.LogIn(a)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		running := map[string]bool{}
		if d := r.current(); d != nil {
			for _, s := range d.Status() {
				running[s.Account] = true
			}
		}
		all := true
		for _, a := range accounts {
			all = all && running[a]
		}
		if all {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.log.Warn("demo: an account logged in again did not resume within a minute")
}
