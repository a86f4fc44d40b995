package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

const cookieName = "stashd_console"

// Bounds of the server-side state a client can make the console keep.
const (
	// maxSessions caps live sessions; a login beyond it ends the session
	// closest to expiry.
	maxSessions = 1024
	// loginFailures failed logins within loginWindow make a client wait
	// for the rest of the window.
	loginFailures = 5
	loginWindow   = time.Minute
	// maxThrottled caps the clients whose failures are remembered.
	maxThrottled = 4096
)

// sessions are the console's logins: a random id per login, kept here with
// its expiry, so that a cookie reveals nothing about the token and a
// logout or a restart ends it.
type sessions struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	byID map[string]time.Time // id → expiry
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, byID: map[string]time.Time{}}
}

// open starts a session and returns its id.
func (s *sessions) open() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	id := hex.EncodeToString(b)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.byID {
		if !now.Before(exp) {
			delete(s.byID, k)
		}
	}
	if len(s.byID) >= maxSessions {
		var oldest string
		for k, exp := range s.byID {
			if oldest == "" || exp.Before(s.byID[oldest]) {
				oldest = k
			}
		}
		delete(s.byID, oldest)
	}
	s.byID[id] = now.Add(s.ttl)
	return id
}

// valid reports whether id names a live session.
func (s *sessions) valid(id string) bool {
	if id == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.byID[id]
	if ok && !s.now().Before(exp) {
		delete(s.byID, id)
		return false
	}
	return ok
}

func (s *sessions) close(id string) {
	s.mu.Lock()
	delete(s.byID, id)
	s.mu.Unlock()
}

func sessionID(r *http.Request) string {
	if ck, err := r.Cookie(cookieName); err == nil {
		return ck.Value
	}
	return ""
}

// throttle counts failed logins per client.
type throttle struct {
	now func() time.Time

	mu       sync.Mutex
	failures map[netip.Addr]*failures
}

type failures struct {
	n     int
	since time.Time // the window's start
}

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, failures: map[netip.Addr]*failures{}}
}

// wait returns how long ip must wait before its next attempt; zero: none.
func (t *throttle) wait(ip netip.Addr) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.failures[ip]
	if f == nil {
		return 0
	}
	left := f.since.Add(loginWindow).Sub(t.now())
	if left <= 0 {
		delete(t.failures, ip)
		return 0
	}
	if f.n < loginFailures {
		return 0
	}
	return left
}

// fail records a failed attempt by ip and returns the count in its window.
func (t *throttle) fail(ip netip.Addr) int {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.failures[ip]
	if f == nil || !now.Before(f.since.Add(loginWindow)) {
		if len(t.failures) >= maxThrottled {
			for k, v := range t.failures {
				if !now.Before(v.since.Add(loginWindow)) {
					delete(t.failures, k)
				}
			}
		}
		if len(t.failures) >= maxThrottled {
			// Still full of live windows: forget one rather than grow.
			for k := range t.failures {
				delete(t.failures, k)
				break
			}
		}
		f = &failures{since: now}
		t.failures[ip] = f
	}
	f.n++
	return f.n
}

// login shows the token form (GET) and, given the right token (POST),
// opens a session and sets its cookie: a browser cannot send a bearer
// header by itself. The gate has run: the client may be here, and the body
// is capped.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	next := r.URL.Query().Get("next")
	if r.Method == http.MethodPost {
		if err := r.ParseForm(); err != nil {
			c.badForm(w, err)
			return
		}
		next = r.PostForm.Get("next")
	}
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") {
		next = Prefix
	}
	if c.cfg.Token == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	data := map[string]any{"Title": "Log in", "Next": next}
	switch r.Method {
	case http.MethodGet:
		c.render(w, http.StatusOK, "login", data)
	case http.MethodPost:
		ip := c.clientIP(r)
		if wait := c.throttle.wait(ip); wait > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int(wait.Round(time.Second)/time.Second)+1))
			data["Error"] = "Too many failed attempts: wait a minute."
			c.render(w, http.StatusTooManyRequests, "login", data)
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(c.cfg.Token)) != 1 {
			n := c.throttle.fail(ip)
			c.log.Warn("console login failed", "client", ip.String(), "failures", n)
			data["Error"] = "Wrong token."
			c.render(w, http.StatusUnauthorized, "login", data)
			return
		}
		c.log.Info("console login", "client", ip.String())
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.sessions.open(), Path: Prefix,
			MaxAge: int(c.cfg.SessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r)})
		http.Redirect(w, r, next, http.StatusSeeOther)
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	}
}

// logout ends the session and clears its cookie.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	c.sessions.close(sessionID(r))
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r)})
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}

// badForm answers a body the console could not parse: 413 when it was cut
// at maxForm.
func (c *Console) badForm(w http.ResponseWriter, err error) {
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return
	}
	c.fail(w, http.StatusBadRequest, "Bad form.", nil)
}
