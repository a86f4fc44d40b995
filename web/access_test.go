package web_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"stashd/web"
)

// A page on attacker.example whose name rebinds to 127.0.0.1 reaches the
// listener, but its requests carry Host: attacker.example: without a token
// they are refused before anything is read.
func TestRebindingHostRefused(t *testing.T) {
	t.Parallel()
	c := newConsole(t, web.Config{Catalogue: stretchCatalogue{}})
	for _, host := range []string{"attacker.example:9464", "attacker.example", "127.0.0.1.nip.io:9464", "192.0.2.1:9464", "localhost.attacker.example"} {
		for _, path := range []string{"/console/", "/console/deadletters", "/console/login"} {
			req := httptest.NewRequest("GET", path, nil)
			req.Host = host
			if rec := do(c, req, local); rec.Code != http.StatusMisdirectedRequest {
				t.Errorf("Host %s, GET %s: status %d, want 421", host, path, rec.Code)
			}
		}
		req := httptest.NewRequest("POST", "/console/deadletters/retry", strings.NewReader("all=1"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Host = host
		if rec := do(c, req, local); rec.Code != http.StatusMisdirectedRequest {
			t.Errorf("Host %s, POST retry: status %d, want 421", host, rec.Code)
		}
	}
	for _, host := range []string{"127.0.0.1:9464", "127.0.0.1", "[::1]:9464", "localhost:9464", "LOCALHOST", "127.1.2.3:80"} {
		req := httptest.NewRequest("GET", "/console/", nil)
		req.Host = host
		if rec := do(c, req, local); rec.Code != http.StatusOK {
			t.Errorf("Host %s: status %d, want 200", host, rec.Code)
		}
	}
	// With a token the token is the defence, and the console answers
	// whatever name it is reached by.
	locked := newConsole(t, web.Config{Catalogue: stretchCatalogue{}, Token: "s3cret"})
	req := httptest.NewRequest("GET", "/console/", nil)
	req.Host = "stashd.internal:9464"
	req.Header.Set("Authorization", "Bearer s3cret")
	if rec := do(locked, req, local); rec.Code != http.StatusOK {
		t.Errorf("token set, Host stashd.internal: status %d, want 200", rec.Code)
	}
}

// countingReader is a body that counts what the server reads of it.
type countingReader struct {
	mu   sync.Mutex
	left int
	read int
}

func (r *countingReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), r.left)
	for i := range p[:n] {
		p[i] = 'a'
	}
	r.left -= n
	r.read += n
	return n, nil
}

// A 10 MB body is refused with 413 after at most a few KiB are read, with
// or without a length, with or without a token, on every form (or left
// unread where the handler reads none).
func TestHugeBodiesRefused(t *testing.T) {
	t.Parallel()
	const size = 10 << 20
	open := newConsole(t, web.Config{Catalogue: stretchCatalogue{}})
	locked := newConsole(t, web.Config{Catalogue: stretchCatalogue{}, Token: "s3cret"})
	for name, c := range map[string]*web.Console{"no token": open, "token": locked} {
		for _, path := range []string{"/console/login", "/console/deadletters/retry", "/console/logout"} {
			for _, chunked := range []bool{false, true} {
				body := &countingReader{left: size}
				req := httptest.NewRequest("POST", path, body)
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("Authorization", "Bearer s3cret")
				req.ContentLength = size
				if chunked {
					req.ContentLength = -1
				}
				rec := do(c, req, local)
				// Logout reads no body: a chunked one is left unread.
				refused := rec.Code == http.StatusRequestEntityTooLarge || (path == "/console/logout" && chunked && body.read == 0)
				if !refused || body.read > 64<<10 {
					t.Errorf("%s, POST %s (chunked %v): status %d after reading %d bytes; want 413 after a few KiB",
						name, path, chunked, rec.Code, body.read)
				}
			}
		}
	}
}

func login(c http.Handler, token, remote string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "https://127.0.0.1/console/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return do(c, req, remote)
}

func getWith(c http.Handler, ck *http.Cookie, remote string) int {
	req := httptest.NewRequest("GET", "https://127.0.0.1/console/sources", nil)
	if ck != nil {
		req.AddCookie(ck)
	}
	return do(c, req, remote).Code
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// A login opens a server-side session with a random id: the cookie is
// Secure, HttpOnly and SameSite=Strict, says nothing of the token, expires,
// and a logout ends it.
func TestSessions(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	st, _ := seeded(t)
	c := newConsole(t, web.Config{Catalogue: st, Token: "s3cret-s3cret-s3cret", AllowRemote: true, TLS: true,
		SessionTTL: time.Hour, Now: clk.Now})
	remote := "192.0.2.7:5000"
	first, second := login(c, "s3cret-s3cret-s3cret", remote), login(c, "s3cret-s3cret-s3cret", remote)
	a, b := first.Result().Cookies(), second.Result().Cookies()
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("login cookies %v and %v, want one each", a, b)
	}
	ck := a[0]
	if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.MaxAge != 3600 || ck.Path != "/console/" {
		t.Errorf("cookie %+v: want Secure, HttpOnly, SameSite=Strict, Max-Age 3600, Path /console/", ck)
	}
	if ck.Value == b[0].Value || len(ck.Value) < 32 {
		t.Errorf("two logins got cookies %q and %q: want distinct random ids", ck.Value, b[0].Value)
	}
	if code := getWith(c, ck, remote); code != http.StatusOK {
		t.Fatalf("with the session: status %d", code)
	}
	forged := *ck
	forged.Value = strings.Repeat("0", len(ck.Value))
	if code := getWith(c, &forged, remote); code != http.StatusSeeOther {
		t.Errorf("a made-up session id: status %d, want a redirect to the login page", code)
	}
	// Logging out ends this session, not the other one.
	out := httptest.NewRequest("POST", "https://127.0.0.1/console/logout", nil)
	out.AddCookie(ck)
	rec := do(c, out, remote)
	cleared := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cleared) != 1 || cleared[0].MaxAge >= 0 {
		t.Errorf("logout: status %d, cookies %v; want a redirect clearing the cookie", rec.Code, cleared)
	}
	if code := getWith(c, ck, remote); code != http.StatusSeeOther {
		t.Errorf("after logout: status %d, want a redirect to the login page", code)
	}
	if code := getWith(c, b[0], remote); code != http.StatusOK {
		t.Errorf("the other session after this one's logout: status %d, want 200", code)
	}
	clk.Add(time.Hour + time.Second)
	if code := getWith(c, b[0], remote); code != http.StatusSeeOther {
		t.Errorf("an expired session: status %d, want a redirect to the login page", code)
	}
	// The logout button is on every page once a token is set.
	if page := do(c, func() *http.Request {
		r := httptest.NewRequest("GET", "https://127.0.0.1/console/", nil)
		r.Header.Set("Authorization", "Bearer s3cret-s3cret-s3cret")
		return r
	}(), remote).Body.String(); !strings.Contains(page, `action="/console/logout"`) {
		t.Errorf("no logout form on the search page:\n%s", page)
	}
}

// Failed logins are logged without the token tried and, past five a
// minute, refused with 429 for that client only, even with the right token.
func TestFailedLoginsThrottled(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	c := newConsole(t, web.Config{Catalogue: stretchCatalogue{}, Token: "s3cret-s3cret-s3cret", AllowRemote: true, TLS: true,
		Now: clk.Now, Logger: log})
	attacker, other := "192.0.2.7:5000", "192.0.2.8:5000"
	for i := range 5 {
		if rec := login(c, "guess-number-"+itoa(int64(i)), attacker); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: status %d, want 401", i, rec.Code)
		}
	}
	rec := login(c, "s3cret-s3cret-s3cret", attacker)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || len(rec.Result().Cookies()) != 0 {
		t.Errorf("sixth attempt: status %d, Retry-After %q, cookies %v; want 429 and no session",
			rec.Code, rec.Header().Get("Retry-After"), rec.Result().Cookies())
	}
	if rec := login(c, "s3cret-s3cret-s3cret", other); rec.Code != http.StatusSeeOther {
		t.Errorf("another client: status %d, want a login", rec.Code)
	}
	clk.Add(time.Minute)
	if rec := login(c, "s3cret-s3cret-s3cret", attacker); rec.Code != http.StatusSeeOther {
		t.Errorf("a minute later: status %d, want a login", rec.Code)
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if strings.Count(out, "console login failed") != 5 || !strings.Contains(out, "client=192.0.2.7") {
		t.Errorf("want five failures logged with the client:\n%s", out)
	}
	if strings.Contains(out, "guess-number") || strings.Contains(out, "s3cret") {
		t.Errorf("a token reached the log:\n%s", out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Clients beyond loopback are served over HTTPS only: the listener's TLS,
// or a trusted proxy's X-Forwarded-Proto; anyone else's forwarding headers
// are ignored.
func TestRemoteNeedsHTTPS(t *testing.T) {
	t.Parallel()
	const token = "s3cret-s3cret-s3cret"
	if _, err := web.New(web.Config{Catalogue: stretchCatalogue{}, Token: token, AllowRemote: true}); err == nil {
		t.Error("AllowRemote with neither TLS nor a proxy: no error")
	}
	direct := newConsole(t, web.Config{Catalogue: stretchCatalogue{}, Token: token, AllowRemote: true, TLS: true})
	plain := httptest.NewRequest("GET", "/console/", nil)
	plain.Header.Set("Authorization", "Bearer "+token)
	if rec := do(direct, plain, "192.0.2.7:5000"); rec.Code != http.StatusForbidden {
		t.Errorf("remote client over plain HTTP: status %d, want 403", rec.Code)
	}
	proxied := newConsole(t, web.Config{Catalogue: stretchCatalogue{}, Token: token, AllowRemote: true, BehindProxy: true,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32")}})
	req := func(from, proto string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/console/login", strings.NewReader("token="+token))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("X-Forwarded-For", "198.51.100.1, 192.0.2.7")
		r.Header.Set("X-Forwarded-Proto", proto)
		return do(proxied, r, from)
	}
	if rec := req("10.0.0.5:40000", "http"); rec.Code != http.StatusForbidden {
		t.Errorf("through the proxy over HTTP: status %d, want 403", rec.Code)
	}
	if rec := req("192.0.2.9:40000", "https"); rec.Code != http.StatusForbidden {
		t.Errorf("X-Forwarded-Proto from a client that is not the proxy: status %d, want 403", rec.Code)
	}
	rec := req("10.0.0.5:40000", "https")
	if ck := rec.Result().Cookies(); rec.Code != http.StatusSeeOther || len(ck) != 1 || !ck[0].Secure {
		t.Errorf("through the proxy over HTTPS: status %d, cookies %v; want a login with a Secure cookie", rec.Code, ck)
	}
	// A proxy on loopback does not make its clients local.
	local := newConsole(t, web.Config{Catalogue: stretchCatalogue{}, Token: token, BehindProxy: true})
	r := httptest.NewRequest("GET", "/console/", nil)
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("X-Forwarded-For", "192.0.2.7")
	r.Header.Set("X-Forwarded-Proto", "https")
	if rec := do(local, r, "127.0.0.1:40000"); rec.Code != http.StatusForbidden {
		t.Errorf("a remote client through a loopback proxy, console_remote off: status %d, want 403", rec.Code)
	}
}

// The listener's other endpoints answer loopback clients as they are and
// others only with the token.
func TestProtectNeedsTokenBeyondLoopback(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metrics") })
	for _, token := range []string{"", "s3cret"} {
		c := newConsole(t, web.Config{Catalogue: stretchCatalogue{}, Token: token})
		h := c.Protect(ok)
		if rec := do(h, httptest.NewRequest("GET", "/metrics", nil), local); rec.Code != http.StatusOK {
			t.Errorf("token %q, loopback client: status %d, want 200", token, rec.Code)
		}
		if rec := do(h, httptest.NewRequest("GET", "/metrics", nil), "192.0.2.7:5000"); rec.Code/100 != 4 {
			t.Errorf("token %q, remote client without it: status %d, want 401 or 403", token, rec.Code)
		}
		withToken := httptest.NewRequest("GET", "/metrics", nil)
		withToken.Header.Set("Authorization", "Bearer s3cret")
		want := http.StatusOK
		if token == "" {
			want = http.StatusForbidden
		}
		if rec := do(h, withToken, "192.0.2.7:5000"); rec.Code != want {
			t.Errorf("token %q, remote client with Bearer s3cret: status %d, want %d", token, rec.Code, want)
		}
	}
}

// The listener's other endpoints refuse a loopback client that names a
// foreign host, as the console does (DNS rebinding), with or without a
// token set; the token still opens them under any name.
func TestProtectRefusesRebindingHost(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metrics") })
	for _, token := range []string{"", "s3cret"} {
		h := newConsole(t, web.Config{Catalogue: stretchCatalogue{}, Token: token}).Protect(ok)
		for _, host := range []string{"attacker.example:9464", "attacker.example", "127.0.0.1.nip.io:9464", "192.0.2.1:9464", "localhost.attacker.example",
			"localhost..:9464"} {
			for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
				req := httptest.NewRequest("GET", path, nil)
				req.Host = host
				if rec := do(h, req, local); rec.Code != http.StatusMisdirectedRequest || strings.Contains(rec.Body.String(), "metrics") {
					t.Errorf("token %q, Host %s, GET %s from loopback: status %d body %q, want 421", token, host, path, rec.Code, rec.Body.String())
				}
			}
		}
		// Loopback as scrapers and health checkers name it; "" is an
		// HTTP/1.0 request without Host (a browser always sends one).
		for _, host := range []string{"127.0.0.1:9464", "[::1]:9464", "localhost:9464", "LOCALHOST", "127.1.2.3:80",
			"localhost.:9464", "[::ffff:127.0.0.1]:9464", ""} {
			req := httptest.NewRequest("GET", "/metrics", nil)
			req.Host = host
			if rec := do(h, req, local); rec.Code != http.StatusOK {
				t.Errorf("token %q, Host %s from loopback: status %d, want 200", token, host, rec.Code)
			}
		}
		if token == "" {
			continue
		}
		req := httptest.NewRequest("GET", "/metrics", nil)
		req.Host = "stashd.internal:9464"
		req.Header.Set("Authorization", "Bearer "+token)
		if rec := do(h, req, local); rec.Code != http.StatusOK {
			t.Errorf("Host stashd.internal with the token: status %d, want 200", rec.Code)
		}
	}
}
