package web_test

import (
	"archive/zip"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"stashd/harness/demo"
	"stashd/internal/pgtest"
	"stashd/store"
)

// hostileEntry is an archive entry name that is markup.
const hostileEntry = "<img src=x onerror=alert(1)>.stl"

// The console of a demo database: a demo run (the whole pipeline on the
// simulator, audited) that also posted an archive holding a hostile entry
// name. A headless Chromium searches a file the demo catalogued inside a
// package, opens that package, sees the hostile name as text, retries one
// of the demo's dead letters and takes screenshots.
func TestBrowserConsoleOnDemoDatabase(t *testing.T) {
	bin := chromium(t)
	t.Parallel()
	posts := t.TempDir()
	writeZip(t, filepath.Join(posts, "hostile-names.zip"), hostileEntry, "models/ok.stl")
	url := pgtest.New(t)
	rep, err := demo.Run(t.Context(), demo.Options{Seed: 7, Steps: 60, Rate: -1, Sources: 2, Accounts: 1,
		PostDir: posts, DatabaseURL: url, FilesDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("the demo's audit failed: %+v", rep)
	}
	st, err := store.Open(t.Context(), store.Config{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// A file the demo catalogued inside a package, and the hostile package.
	var pkgName, file string
	err = st.Pool().QueryRow(t.Context(), `SELECT p.name, f.path FROM package_files f JOIN packages p ON p.id = f.package_id
		WHERE NOT f.is_dir AND f.path LIKE '%/%' AND length(f.path) > 12 AND p.name NOT LIKE 'hostile%' ORDER BY p.id LIMIT 1`).Scan(&pkgName, &file)
	if err != nil {
		t.Fatalf("no file listed in the demo's catalogue: %v", err)
	}
	var hostileID int64
	if err := st.Pool().QueryRow(t.Context(), `SELECT id FROM packages WHERE name = 'hostile-names.zip'`).Scan(&hostileID); err != nil {
		t.Fatalf("the posted archive is not catalogued: %v", err)
	}

	srv := consoleServer(t, st)
	ctx, dialogs := startBrowser(t, bin)
	must, text, shot := browserSteps(t, ctx)

	// Part of the file's base name, in upper case.
	base := path.Base(file)
	query := strings.ToUpper(base[:max(len(base)-4, 3)])
	t.Logf("searching %q for %s in package %s", query, file, pkgName)
	must("search", chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(`input[name=q]`),
		// SetValue, not SendKeys: key events cannot type every letter a
		// demo file name holds (Cyrillic among them).
		chromedp.SetValue(`input[name=q]`, query),
		chromedp.Submit(`input[name=q]`),
	))
	// The page before the search lists packages too: wait for the search's
	// own page, which shows the query in its box.
	must("results", chromedp.Do(ctx,
		chromedp.WaitVisible(`input[name=q][value="`+query+`"]`),
		chromedp.WaitVisible(`#results a.pkg`),
	))
	if results := text(`#results`); !strings.Contains(results, pkgName) {
		t.Fatalf("searching %q: results do not show package %s (holding %s):\n%s", query, pkgName, file, results)
	}
	shot("demo-search.png")

	// Open that package from its result.
	link := `//*[@id="results"]//a[contains(@class, "pkg") and normalize-space(.) = "` + pkgName + `"]`
	must("open package", chromedp.Do(ctx,
		chromedp.Click(chromedp.Search(link)),
		chromedp.WaitVisible(`#listing`),
	))
	if listing := text(`#listing`); !strings.Contains(listing, base) {
		t.Errorf("package page of %s does not list %s:\n%s", pkgName, base, listing)
	}

	must("hostile package", chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/console/package/"+itoa(hostileID)),
		chromedp.WaitVisible(`#listing`),
	))
	hostile := text(`#listing`)
	images, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('img').length`))
	must("count images", err)
	shot("demo-hostile.png")
	if images != 0 || !strings.Contains(hostile, hostileEntry) {
		t.Errorf("hostile name: %d img elements, listing:\n%s", images, hostile)
	}

	// The demo's incomplete sets are dead letters: retry the first.
	must("retry", chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/console/deadletters"),
		chromedp.WaitVisible(`button.retry`),
		chromedp.Click(`button.retry`),
		chromedp.WaitVisible(`#retried`),
	))
	if notice := text(`#retried`); !strings.HasPrefix(notice, "1 dead letter") {
		t.Errorf("after Retry: notice %q, want one dead letter scheduled", notice)
	}
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}

// writeZip writes a zip at path holding the named entries.
func writeZip(t *testing.T, path string, names ...string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	for _, n := range names {
		w, err := zw.Create(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("solid " + n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
