package web

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"stashd/store"
	"stashd/tg"
)

// Prefix is where the console lives on the daemon's HTTP mux.
const Prefix = "/console/"

// Catalogue is what the console reads and the one thing it writes
// (scheduling dead letters); *store.Store implements it.
type Catalogue interface {
	Search(ctx context.Context, q store.SearchQuery) (store.SearchPage, error)
	GetPackageDetail(ctx context.Context, id int64) (store.PackageDetail, error)
	Status(ctx context.Context) (store.Status, error)
	DeadLetters(ctx context.Context, state store.DeadLetterState, limit int) ([]store.DeadLetter, error)
	ScheduleDeadLetters(ctx context.Context, key *tg.MessageKey) (int, error)
}

// Config configures the console.
type Config struct {
	// Catalogue is the store. Required.
	Catalogue Catalogue
	// Token, when set, is required from every client: an
	// "Authorization: Bearer TOKEN" header, or the cookie the login page
	// sets. Empty: no token, and only loopback clients are served.
	Token string
	// AllowRemote serves clients that are not on loopback, over HTTPS
	// only. It requires a Token, and TLS or BehindProxy. False:
	// non-loopback clients get 403 whatever they present.
	AllowRemote bool
	// TLS says that the listener serves HTTPS itself.
	TLS bool
	// BehindProxy says that clients reach the console through a reverse
	// proxy at one of TrustedProxies, whose X-Forwarded-For names the
	// client and whose X-Forwarded-Proto says whether it used HTTPS. The
	// headers of any other client are ignored.
	BehindProxy bool
	// TrustedProxies are the proxies' addresses; empty means loopback
	// (127.0.0.0/8 and ::1).
	TrustedProxies []netip.Prefix
	// SessionTTL is how long a login lasts; zero means 12 h.
	SessionTTL time.Duration
	// Now is the clock of sessions and login throttling; nil means
	// time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
	// MaxListing bounds the listing entries a package page shows; zero
	// means 5000.
	MaxListing int
	// SearchTimeout bounds one search, so that a very broad text cannot
	// keep a database connection busy; zero means 10 s.
	SearchTimeout time.Duration
}

// Console is the web console's http.Handler, to mount at Prefix.
type Console struct {
	cfg      Config
	log      *slog.Logger
	pages    map[string]*template.Template
	csrfKey  []byte
	handler  http.Handler
	sessions *sessions
	throttle *throttle
}

//go:embed templates static
var files embed.FS

// New builds the console.
func New(cfg Config) (*Console, error) {
	if cfg.Catalogue == nil {
		return nil, errors.New("console: no catalogue")
	}
	if cfg.AllowRemote && cfg.Token == "" {
		return nil, errors.New("console: serving non-loopback clients needs a token")
	}
	if cfg.AllowRemote && !cfg.TLS && !cfg.BehindProxy {
		return nil, errors.New("console: serving non-loopback clients needs TLS or a proxy that provides it")
	}
	if len(cfg.TrustedProxies) == 0 {
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.MaxListing = max(cfg.MaxListing, 0)
	if cfg.MaxListing == 0 {
		cfg.MaxListing = 5000
	}
	if cfg.SearchTimeout <= 0 {
		cfg.SearchTimeout = 10 * time.Second
	}
	c := &Console{cfg: cfg, log: cfg.Logger, pages: map[string]*template.Template{}, csrfKey: make([]byte, 32),
		sessions: newSessions(cfg.SessionTTL, cfg.Now), throttle: newThrottle(cfg.Now)}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	_, _ = rand.Read(c.csrfKey) // crypto/rand.Read never fails on Linux
	funcs := template.FuncMap{
		"vis":    Printable,
		"hidden": HasHidden,
		"size":   FormatSize,
		"when":   func(t time.Time) string { return when(t) },
		"link":   tg.MessageLink,
		"server": func(m tg.MessageID) int64 { return m.ServerID() },
		"prefix": func() string { return Prefix },
		"csrf":   c.csrfToken,
		"add":    func(a, b int) int { return a + b },
		"locked": func() bool { return cfg.Token != "" },
	}
	for _, page := range []string{"search", "package", "sources", "deadletters", "login", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("parse console templates: %w", err)
		}
		c.pages[page] = t
	}
	static, _ := fs.Sub(files, "static")
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{$}", c.search)
	mux.HandleFunc("GET "+Prefix+"package/{id}", c.pkg)
	mux.HandleFunc("GET "+Prefix+"sources", c.sources)
	mux.HandleFunc("GET "+Prefix+"deadletters", c.deadLetters)
	mux.HandleFunc("POST "+Prefix+"deadletters/retry", c.retry)
	mux.HandleFunc("POST "+Prefix+"logout", c.logout)
	mux.Handle("GET "+Prefix+"static/", http.StripPrefix(Prefix+"static/", staticFiles(static)))
	// A cross-origin POST (another site's form aimed at the console) is
	// refused before the CSRF token is even looked at.
	csrf := http.NewCrossOriginProtection()
	protected := csrf.Handler(mux)
	c.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setHeaders(w)
		if !c.gate(w, r) {
			return
		}
		if r.URL.Path == Prefix+"login" {
			c.login(w, r)
			return
		}
		if !c.allowed(w, r) {
			return
		}
		protected.ServeHTTP(w, r)
	})
	return c, nil
}

// ServeHTTP serves the console.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// Mount mounts the console on mux at Prefix, with / redirecting to it.
func (c *Console) Mount(mux *http.ServeMux) {
	mux.Handle(Prefix, c)
	mux.Handle("GET /{$}", http.RedirectHandler(Prefix, http.StatusFound))
}

// staticFiles serves fsys; a name fsys cannot hold (invalid UTF-8, say)
// is not found, where http.FileServerFS would answer 500.
func staticFiles(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name := strings.TrimPrefix(r.URL.Path, "/"); name != "" && !fs.ValidPath(name) {
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(w, r)
	})
}

// setHeaders forbids scripts, frames, plugins and foreign form targets,
// and keeps the console's addresses out of the t.me links' Referer.
func setHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// csrfToken is the token every form of the console carries: a keyed digest
// that no other site can read or compute.
func (c *Console) csrfToken() string {
	m := hmac.New(sha256.New, c.csrfKey)
	m.Write([]byte("retry"))
	return hex.EncodeToString(m.Sum(nil))
}

func (c *Console) render(w http.ResponseWriter, status int, page string, data any) {
	var b strings.Builder
	if err := c.pages[page].Execute(&b, data); err != nil {
		c.log.Error("render console page", "page", page, "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

func (c *Console) fail(w http.ResponseWriter, status int, msg string, err error) {
	if err != nil {
		c.log.Warn("console request failed", "err", err)
	}
	c.render(w, status, "error", map[string]any{"Title": "Error", "Status": status, "Message": msg})
}

// searchForm is the search page's query as typed.
type searchForm struct {
	Q, Format, MinSize, MaxSize, Source, Since string
}

func (c *Console) search(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	f := searchForm{Q: v.Get("q"), Format: v.Get("format"), MinSize: v.Get("min_size"), MaxSize: v.Get("max_size"),
		Source: v.Get("source"), Since: v.Get("since")}
	q, err := f.query()
	if err != nil {
		c.render(w, http.StatusBadRequest, "search", map[string]any{"Title": "Search", "Form": f, "Error": err.Error()})
		return
	}
	q.Cursor = v.Get("after")
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.SearchTimeout)
	defer cancel()
	page, err := c.cfg.Catalogue.Search(ctx, q)
	if errors.Is(err, store.ErrBadCursor) {
		c.fail(w, http.StatusBadRequest, "That page link is not valid.", nil)
		return
	}
	if ctx.Err() != nil && r.Context().Err() == nil {
		c.fail(w, http.StatusServiceUnavailable, "The search took too long: make the text longer or add a filter.", nil)
		return
	}
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "The search failed.", err)
		return
	}
	next := ""
	if page.Next != "" {
		v.Set("after", page.Next)
		next = Prefix + "?" + v.Encode()
	}
	c.render(w, http.StatusOK, "search", map[string]any{"Title": "Search", "Form": f, "Page": page, "Next": next})
}

func (f searchForm) query() (store.SearchQuery, error) {
	q := store.SearchQuery{Text: strings.TrimSpace(f.Q), Format: strings.ToLower(strings.TrimSpace(f.Format)), Limit: 50}
	// The catalogue's text holds neither NUL nor invalid UTF-8: such a
	// query could only fail there.
	for field, v := range map[string]string{"text": f.Q, "format": f.Format} {
		if !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return q, fmt.Errorf("%s: not valid UTF-8 text", field)
		}
	}
	var err error
	if q.MinSize, err = ParseSize(f.MinSize); err != nil {
		return q, fmt.Errorf("min size: %w", err)
	}
	if q.MaxSize, err = ParseSize(f.MaxSize); err != nil {
		return q, fmt.Errorf("max size: %w", err)
	}
	if s := strings.TrimSpace(f.Source); s != "" {
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("source: %q is not a chat id", s)
		}
		q.Source = tg.ChatID(id)
	}
	if s := strings.TrimSpace(f.Since); s != "" {
		t, err := time.ParseInLocation(time.DateOnly, s, time.Local)
		if err != nil {
			return q, fmt.Errorf("since: %q is not a date (YYYY-MM-DD)", s)
		}
		q.Since = t
	}
	return q, nil
}

func (c *Console) pkg(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, http.StatusNotFound, "No such package.", nil)
		return
	}
	d, err := c.cfg.Catalogue.GetPackageDetail(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		c.fail(w, http.StatusNotFound, "No such package.", nil)
		return
	}
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "Cannot read the package.", err)
		return
	}
	shown := d.Files
	if len(shown) > c.cfg.MaxListing {
		shown = shown[:c.cfg.MaxListing]
	}
	unsafe := 0
	for _, f := range d.Files {
		if f.Unsafe || HasHidden(f.Path) {
			unsafe++
		}
	}
	c.render(w, http.StatusOK, "package", map[string]any{
		"Title": d.Package.Name, "D": d, "Tree": buildTree(shown), "Shown": len(shown), "Flagged": unsafe,
	})
}

func (c *Console) sources(w http.ResponseWriter, r *http.Request) {
	st, err := c.cfg.Catalogue.Status(r.Context())
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "Cannot read the sources.", err)
		return
	}
	c.render(w, http.StatusOK, "sources", map[string]any{"Title": "Sources", "S": st})
}

func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request) {
	dls, err := c.cfg.Catalogue.DeadLetters(r.Context(), "", 500)
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "Cannot read the dead letters.", err)
		return
	}
	c.render(w, http.StatusOK, "deadletters", map[string]any{"Title": "Dead letters", "Letters": dls, "Retried": r.URL.Query().Get("retried")})
}

// retry makes one dead letter (key=CHAT/MSG, server id) or every
// unresolved one (all=1) due now, as `stashd deadletters retry` does; the
// daemon's retry loop picks them up.
func (c *Console) retry(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		c.badForm(w, err)
		return
	}
	if !hmac.Equal([]byte(r.PostForm.Get("csrf")), []byte(c.csrfToken())) {
		c.fail(w, http.StatusForbidden, "The form is stale or forged: reload the page and try again.", nil)
		return
	}
	var key *tg.MessageKey
	if r.PostForm.Get("all") != "1" {
		k, err := parseKey(r.PostForm.Get("key"))
		if err != nil {
			c.fail(w, http.StatusBadRequest, err.Error(), nil)
			return
		}
		key = &k
	}
	n, err := c.cfg.Catalogue.ScheduleDeadLetters(r.Context(), key)
	if err != nil {
		c.fail(w, http.StatusInternalServerError, "Cannot schedule the retry.", err)
		return
	}
	c.log.Info("dead letters scheduled from the console", "count", n)
	http.Redirect(w, r, Prefix+"deadletters?retried="+strconv.Itoa(n), http.StatusSeeOther)
}

func parseKey(s string) (tg.MessageKey, error) {
	ch, m, ok := strings.Cut(s, "/")
	chat, err1 := strconv.ParseInt(ch, 10, 64)
	msg, err2 := strconv.ParseInt(m, 10, 64)
	if !ok || err1 != nil || err2 != nil || msg <= 0 {
		return tg.MessageKey{}, fmt.Errorf("%q is not CHAT/MSG", s)
	}
	return tg.MessageKey{Chat: tg.ChatID(chat), Message: tg.MessageIDFromServer(msg)}, nil
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04")
}
