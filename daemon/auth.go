package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/store"
	"stashd/tg"
)

// DefaultLoginPoll is how often an account that is not logged in is tried
// again when Config.LoginPoll is zero. A try opens the account's TDLib
// database locally: a session that is not logged in makes no request to
// Telegram.
const DefaultLoginPoll = 30 * time.Second

// authMetrics export each account's login state.
type authMetrics struct {
	loggedIn *prometheus.GaugeVec
}

func newAuthMetrics(reg prometheus.Registerer) *authMetrics {
	m := &authMetrics{loggedIn: prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "stashd_account_logged_in",
		Help: "1 while the account's TDLib session is logged in, 0 once it was found not logged in (never logged in, or logged out remotely): the account is not run until stashd login logs it in again.",
	}, []string{"account"})}
	reg.MustRegister(m.loggedIn)
	return m
}

// authState is what this daemon last found of each account's login, so
// that a change is logged once.
type authState struct {
	mu    sync.Mutex
	known map[string]bool // account -> logged in
}

// loginHint is what the operator does about an account that is not logged
// in.
func loginHint(account string) string {
	return fmt.Sprintf("run stashd login --account %s", account)
}

// notLoggedInReason is the reason recorded for an account found not
// logged in when it was started.
func notLoggedInReason(account string) string {
	return "the session is not logged in (a login never finished, or it was logged out): " + loginHint(account)
}

// notLoggedInState returns TDLib's authorization state an error names
// (tg.NotLoggedInError), or "" when it names none.
func notLoggedInState(err error) string {
	var nl *tg.NotLoggedInError
	if errors.As(err, &nl) {
		return nl.State
	}
	var st interface{ AuthorizationState() string }
	if errors.As(err, &st) {
		return st.AuthorizationState()
	}
	return ""
}

// recordAuth records that account is (or is not) logged in: the metric,
// the account_auth row `stashd status` reads, and one log line when it
// changed. A repeated "not logged in" (the LoginPoll retries) keeps the
// reason first recorded, e.g. the remote logout.
func (d *Daemon) recordAuth(account string, loggedIn bool, state, reason string) {
	d.authM.loggedIn.WithLabelValues(account).Set(b2f(loggedIn))
	d.auth.mu.Lock()
	was, seen := d.auth.known[account]
	d.auth.known[account] = loggedIn
	d.auth.mu.Unlock()
	if seen && !was && !loggedIn {
		return // still not logged in: the first reason stands
	}
	log := d.log.With("account", account)
	switch {
	case !loggedIn && (!seen || was):
		log.Error("account is not logged in; it is not run until it is", "state", state, "reason", reason, "fix", loginHint(account))
	case loggedIn && seen && !was:
		log.Info("account is logged in again; resuming it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.store.SetAccountAuth(ctx, store.AccountAuth{Account: account, LoggedIn: loggedIn, State: state, Reason: reason}); err != nil {
		log.Warn("record the account's login state", "err", err)
	}
}

// loggedOutAccounts returns the accounts last found not logged in.
func (d *Daemon) loggedOutAccounts() []string {
	d.auth.mu.Lock()
	defer d.auth.mu.Unlock()
	var out []string
	for _, a := range d.cfg.Accounts {
		if in, ok := d.auth.known[a.Name]; ok && !in {
			out = append(out, a.Name)
		}
	}
	return out
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
