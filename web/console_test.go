package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"stashd/internal/cataloguetest"
	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/web"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// seeded returns a catalogue filled by cataloguetest.Seed.
func seeded(t *testing.T) (*store.Store, cataloguetest.Seeded) {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	s, err := cataloguetest.Seed(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	return st, s
}

func newConsole(t *testing.T, cfg web.Config) *web.Console {
	t.Helper()
	c, err := web.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// do serves one request from remote (an ip:port) and returns the response.
// A request left at httptest's default Host is given the loopback one a
// browser on the machine sends.
func do(c http.Handler, req *http.Request, remote string) *httptest.ResponseRecorder {
	req.RemoteAddr = remote
	if req.Host == "example.com" {
		req.Host = "127.0.0.1:9464"
	}
	rec := httptest.NewRecorder()
	c.ServeHTTP(rec, req)
	return rec
}

const local = "127.0.0.1:40000"

// Hostile entry names render as text: markup is escaped, control
// characters are shown as escapes, unsafe names are flagged; the page
// forbids scripts.
func TestPackagePageEscapesHostileNames(t *testing.T) {
	t.Parallel()
	st, s := seeded(t)
	c := newConsole(t, web.Config{Catalogue: st})
	rec := do(c, httptest.NewRequest("GET", "/console/package/"+itoa(s.Hostile), nil), local)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	if strings.Contains(body, "<img") || strings.Contains(body, "\x1b") {
		t.Errorf("page carries the raw entry name:\n%s", body)
	}
	for _, want := range []string{"&lt;img src=x onerror=alert(1)&gt;.stl", `evil\x1b[31mred\nline.stl`, "unsafe name", "invisible characters"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q does not forbid scripts", csp)
	}
}

func TestSearchPageFindsFileInsidePackage(t *testing.T) {
	t.Parallel()
	st, s := seeded(t)
	c := newConsole(t, web.Config{Catalogue: st})
	rec := do(c, httptest.NewRequest("GET", "/console/?q=dragon_bust.STL", nil), local)
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, "models/dragons/Dragon_Bust.stl") ||
		!strings.Contains(body, `href="/console/package/`+itoa(s.Dragon)+`"`) ||
		!strings.Contains(body, "https://t.me/c/2000000001/100") {
		t.Errorf("status %d, page lacks the file, its package link or its delivered copy:\n%s", rec.Code, body)
	}
	rec = do(c, httptest.NewRequest("GET", "/console/?q=x&min_size=lots", nil), local)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "min size") {
		t.Errorf("bad size: status %d, want 400 naming the field", rec.Code)
	}
	for _, path := range []string{"/console/sources", "/console/deadletters"} {
		if rec := do(c, httptest.NewRequest("GET", path, nil), local); rec.Code != http.StatusOK {
			t.Errorf("%s: status %d", path, rec.Code)
		}
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// Retry is a POST that needs the page's CSRF token and a same-origin
// request; it schedules the dead letter as the CLI does.
func TestRetryNeedsCSRFToken(t *testing.T) {
	t.Parallel()
	st, _ := seeded(t)
	c := newConsole(t, web.Config{Catalogue: st})
	page := do(c, httptest.NewRequest("GET", "/console/deadletters", nil), local).Body.String()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token on the page:\n%s", page)
	}
	key := cataloguetest.DeadLetterKey
	form := func(csrf string) *http.Request {
		v := url.Values{"csrf": {csrf}, "key": {itoa(int64(key.Chat)) + "/" + itoa(key.Message.ServerID())}}
		r := httptest.NewRequest("POST", "/console/deadletters/retry", strings.NewReader(v.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		return r
	}
	if rec := do(c, form("forged"), local); rec.Code != http.StatusForbidden {
		t.Errorf("forged CSRF token: status %d, want 403", rec.Code)
	}
	cross := form(m[1])
	cross.Header.Set("Sec-Fetch-Site", "cross-site")
	if rec := do(c, cross, local); rec.Code != http.StatusForbidden {
		t.Errorf("cross-site POST: status %d, want 403", rec.Code)
	}
	assertState(t, st, store.DeadExhausted)
	rec := do(c, form(m[1]), local)
	if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Location"), "retried=1") {
		t.Fatalf("retry: status %d, location %q", rec.Code, rec.Header().Get("Location"))
	}
	assertState(t, st, store.DeadPending)
}

func assertState(t *testing.T, st *store.Store, want store.DeadLetterState) {
	t.Helper()
	dls, err := st.DeadLetters(t.Context(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].State != want {
		t.Fatalf("dead letters %+v, want one %s", dls, want)
	}
}

// Without a token only loopback clients are served; serving others needs
// a token, which every client must then present.
func TestConsoleAccess(t *testing.T) {
	t.Parallel()
	st, _ := seeded(t)
	if _, err := web.New(web.Config{Catalogue: st, AllowRemote: true}); err == nil {
		t.Error("AllowRemote without a token: no error")
	}
	open := newConsole(t, web.Config{Catalogue: st})
	if rec := do(open, httptest.NewRequest("GET", "/console/", nil), "192.0.2.7:5000"); rec.Code != http.StatusForbidden {
		t.Errorf("remote client, no token configured: status %d, want 403", rec.Code)
	}
	if rec := do(open, httptest.NewRequest("GET", "/console/", nil), "[::1]:5000"); rec.Code != http.StatusOK {
		t.Errorf("IPv6 loopback client: status %d, want 200", rec.Code)
	}
	locked := newConsole(t, web.Config{Catalogue: st, Token: "s3cret", AllowRemote: true, TLS: true})
	remote := "192.0.2.7:5000"
	if rec := do(locked, httptest.NewRequest("GET", "https://127.0.0.1/console/", nil), remote); rec.Code != http.StatusSeeOther {
		t.Errorf("no token: status %d, want a redirect to the login page", rec.Code)
	}
	post := httptest.NewRequest("POST", "/console/deadletters/retry", strings.NewReader("all=1"))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rec := do(locked, post, local); rec.Code != http.StatusUnauthorized {
		t.Errorf("POST without token, even from loopback: status %d, want 401", rec.Code)
	}
	bad := httptest.NewRequest("GET", "https://127.0.0.1/console/", nil)
	bad.Header.Set("Authorization", "Bearer wrong")
	if rec := do(locked, bad, remote); rec.Code != http.StatusUnauthorized {
		t.Errorf("wrong token: status %d, want 401", rec.Code)
	}
	good := httptest.NewRequest("GET", "https://127.0.0.1/console/", nil)
	good.Header.Set("Authorization", "Bearer s3cret")
	if rec := do(locked, good, remote); rec.Code != http.StatusOK {
		t.Errorf("right token: status %d, want 200", rec.Code)
	}
	login := httptest.NewRequest("POST", "https://127.0.0.1/console/login", strings.NewReader("token=s3cret&next=/console/sources"))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := do(locked, login, remote)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || len(cookies) != 1 || strings.Contains(cookies[0].Value, "s3cret") {
		t.Fatalf("login: status %d, cookies %v; want a redirect and a cookie that is not the token", rec.Code, cookies)
	}
	withCookie := httptest.NewRequest("GET", "https://127.0.0.1/console/sources", nil)
	withCookie.AddCookie(cookies[0])
	if rec := do(locked, withCookie, remote); rec.Code != http.StatusOK {
		t.Errorf("with the login cookie: status %d, want 200", rec.Code)
	}
}

func TestPrintableAndSizes(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain.stl":        "plain.stl",
		"a\x1b[2Jb":        `a\x1b[2Jb`,
		"new\nline":        `new\nline`,
		"rtl\u202eexe.txt": `rtl\u202eexe.txt`,
		`back\slash`:       `back\\slash`,
		"bad\xffutf8":      `bad\xffutf8`,
		"<img src=x>.stl":  "<img src=x>.stl",
		"zero\u200bwidth":  `zero\u200bwidth`,
		"ünïcödé 模型.stl":   "ünïcödé 模型.stl",
	} {
		if got := web.Printable(in); got != want {
			t.Errorf("Printable(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]int64{"": 0, "500": 500, "10M": 10 << 20, "1.5GiB": 3 << 29, "2kb": 2048} {
		if got, err := web.ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"lots", "-1", "1Q"} {
		if _, err := web.ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q): no error", in)
		}
	}
	if got := web.FormatSize(12 << 20); got != "12.0 MiB" {
		t.Errorf("FormatSize(12 MiB) = %q", got)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// slowCatalogue answers a search only when its context ends.
type slowCatalogue struct{ *store.Store }

func (slowCatalogue) Search(ctx context.Context, _ store.SearchQuery) (store.SearchPage, error) {
	<-ctx.Done()
	return store.SearchPage{}, ctx.Err()
}

// A search that outlives its bound ends in a page saying so, not a hang.
func TestSearchTimeoutEndsInAnswer(t *testing.T) {
	t.Parallel()
	c := newConsole(t, web.Config{Catalogue: slowCatalogue{}, SearchTimeout: time.Millisecond})
	rec := do(c, httptest.NewRequest("GET", "/console/?q=a", nil), local)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "took too long") {
		t.Errorf("status %d, want 503 saying the search took too long", rec.Code)
	}
}

// stretchCatalogue answers every search with an empty page that reads on,
// as a text of one or two characters gets where a stretch of the
// catalogue holds no match.
type stretchCatalogue struct{ *store.Store }

func (stretchCatalogue) Search(context.Context, store.SearchQuery) (store.SearchPage, error) {
	return store.SearchPage{Next: "MC4xMjM"}, nil
}

// An empty page with a next one says that nothing matched so far, not that
// nothing matches, and links on.
func TestSearchEmptyPageReadsOn(t *testing.T) {
	t.Parallel()
	c := newConsole(t, web.Config{Catalogue: stretchCatalogue{}})
	rec := do(c, httptest.NewRequest("GET", "/console/?q=q", nil), local)
	body := rec.Body.String()
	if rec.Code != http.StatusOK || strings.Contains(body, "Nothing matches.") || !strings.Contains(body, "read so far") ||
		!strings.Contains(body, "after=MC4xMjM") {
		t.Errorf("status %d, body:\n%s", rec.Code, body)
	}
}

// A query the catalogue cannot hold (NUL, invalid UTF-8) is the client's
// mistake, answered 400, not a failed search.
func TestSearchRefusesTextTheCatalogueCannotHold(t *testing.T) {
	t.Parallel()
	st, _ := seeded(t)
	c := newConsole(t, web.Config{Catalogue: st})
	for _, q := range []string{"q=a%00b", "q=%ff%fe", "format=%8f", "format=zip%00"} {
		rec := do(c, httptest.NewRequest("GET", "/console/?"+q, nil), local)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "not valid UTF-8") {
			t.Errorf("?%s: status %d, want 400 saying the text is not valid", q, rec.Code)
		}
	}
}

// A static file name the embedded files cannot hold is not found, not a
// server error.
func TestStaticOddNameNotFound(t *testing.T) {
	t.Parallel()
	c := newConsole(t, web.Config{Catalogue: stretchCatalogue{}})
	for _, path := range []string{"/console/static/%E5", "/console/static/a/%FF/b.css"} {
		if rec := do(c, httptest.NewRequest("GET", path, nil), local); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", path, rec.Code)
		}
	}
	if rec := do(c, httptest.NewRequest("GET", "/console/static/console.css", nil), local); rec.Code != http.StatusOK {
		t.Errorf("GET console.css: status %d", rec.Code)
	}
}

// The search page shows a package's links to others (repack of, contained
// in …) with a link to the other package, its name escaped.
func TestSearchPageShowsPackageLinks(t *testing.T) {
	t.Parallel()
	st, s := seeded(t)
	if err := st.LinkPackages(t.Context(), s.Terrain, s.Hostile, store.LinkContainedIn); err != nil {
		t.Fatal(err)
	}
	c := newConsole(t, web.Config{Catalogue: st})
	rec := do(c, httptest.NewRequest("GET", "/console/?q=terrain", nil), local)
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, "contained in</span> <a class=\"linked\" href=\"/console/package/"+itoa(s.Hostile)+"\">hostile.zip</a>") {
		t.Errorf("status %d, page lacks the containment link:\n%s", rec.Code, body)
	}
	rec = do(c, httptest.NewRequest("GET", "/console/?q=hostile.zip", nil), local)
	if body := rec.Body.String(); !strings.Contains(body, "contains</span> <a class=\"linked\" href=\"/console/package/"+itoa(s.Terrain)+"\">dragon terrain pack.tar</a>") {
		t.Errorf("page lacks the link back from the larger package:\n%s", body)
	}
}
