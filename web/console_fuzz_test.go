package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"stashd/internal/cataloguetest"
	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/web"
)

// fuzzToken is the token of FuzzConsole's locked console.
const fuzzToken = "fuzz-token-0123456789"

// FuzzConsole sends arbitrary requests (method, target, Host, body,
// credentials, client address) to the console over a real catalogue
// seeded with hostile names, with and without a token. Whatever comes in,
// the console answers with its security headers, never a 500, never
// markup from the catalogue unescaped, and never a page to a client the
// rules turn away.
func FuzzConsole(f *testing.F) {
	st, err := store.Open(context.Background(), store.Config{URL: pgtest.New(f), MaxConns: 4})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(st.Close)
	s, err := cataloguetest.Seed(context.Background(), st)
	if err != nil {
		f.Fatal(err)
	}
	open, err := web.New(web.Config{Catalogue: st})
	if err != nil {
		f.Fatal(err)
	}
	locked, err := web.New(web.Config{Catalogue: st, Token: fuzzToken, AllowRemote: true, TLS: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint8(0), "/console/?q=dragon&min_size=1k", "127.0.0.1:9464", "", "")
	f.Add(uint8(0), "/console/package/"+itoa(s.Hostile), "localhost", "", "")
	f.Add(uint8(1), "/console/deadletters/retry", "[::1]:9464", "all=1&csrf=00", "")
	f.Add(uint8(1), "/console/login?next=//evil.example", "127.0.0.1", "token="+fuzzToken+"&next=/console/sources", "")
	f.Add(uint8(5), "/console/login", "stashd.example", "token=wrong", "")
	f.Add(uint8(4), "/console/sources", "attacker.example:9464", "", "Bearer "+fuzzToken)
	f.Add(uint8(6), "/console/?after=MC4xMjM&source=-100&since=2026-01-01", "127.0.0.1", "", "stashd_console=00")
	f.Add(uint8(3), "/console/logout", "127.0.0.1", "", "")
	f.Add(uint8(2), "/console/static/console.css", "127.0.0.1", "", "")
	f.Add(uint8(0), "/console/?q=%00", "127.0.0.1", "", "")
	methods := []string{"GET", "POST", "HEAD", "PUT"}
	f.Fuzz(func(t *testing.T, sel uint8, target, host, body, cred string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			t.Skip("not a request target")
		}
		c, token := open, ""
		if sel&4 != 0 {
			c, token = locked, fuzzToken
		}
		remote := "127.0.0.1:40000"
		if sel&8 != 0 {
			remote = "192.0.2.7:40000"
		}
		req := &http.Request{Method: methods[int(sel)%len(methods)], URL: u, RequestURI: target, Host: host,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), RemoteAddr: remote}
		if sel&16 != 0 {
			req.TLS = httptest.NewRequest("GET", "https://127.0.0.1/", nil).TLS
		}
		if req.Method == "POST" {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if strings.HasPrefix(cred, "Bearer ") {
			req.Header.Set("Authorization", cred)
		} else if name, value, ok := strings.Cut(cred, "="); ok {
			req.Header.Set("Cookie", name+"="+value)
		}
		rec := httptest.NewRecorder()
		c.ServeHTTP(rec, req)
		code, page := rec.Code, rec.Body.String()
		if rec.Header().Get("Content-Security-Policy") == "" || rec.Header().Get("X-Frame-Options") != "DENY" {
			t.Fatalf("%s %s: answer without the security headers", req.Method, target)
		}
		if code >= 500 && code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s (Host %q, body %q): status %d\n%s", req.Method, target, host, body, code, page)
		}
		if strings.Contains(page, "<img") {
			t.Fatalf("%s %s: markup from the catalogue on the page", req.Method, target)
		}
		if code != http.StatusOK {
			return
		}
		// A page was served: the rules let this client in.
		switch {
		case token == "" && remote != "127.0.0.1:40000":
			t.Fatalf("%s %s: a page for a remote client of the open console", req.Method, target)
		case token == "" && !strings.Contains(host, "127.") && !strings.Contains(host, "::1") && !strings.Contains(strings.ToLower(host), "localhost"):
			t.Fatalf("%s %s: a page for Host %q of the open console", req.Method, target, host)
		case token != "" && remote != "127.0.0.1:40000" && req.TLS == nil:
			t.Fatalf("%s %s: a page for a remote client over plain HTTP", req.Method, target)
		case token != "" && cred != "Bearer "+fuzzToken && !strings.HasPrefix(u.Path, "/console/login") && !strings.HasPrefix(u.Path, "/console/static/"):
			t.Fatalf("%s %s: a page without the token (credentials %q)", req.Method, target, cred)
		}
	})
}
