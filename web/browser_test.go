package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"stashd/internal/cataloguetest"
	"stashd/store"
	"stashd/web"
)

// EnvChromium names the Chromium binary for the browser test; unset, the
// test looks for chromium on PATH and skips when there is none.
const EnvChromium = "STASHD_CHROMIUM"

// EnvScreenshot, when set, is a path the browser test copies its
// screenshot of the search page to.
const EnvScreenshot = "STASHD_CONSOLE_SCREENSHOT"

func chromium(t *testing.T) string {
	if p := os.Getenv(EnvChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("browser test skipped: no chromium on PATH and " + EnvChromium + " unset (make test-browser installs Debian's chromium)")
	return ""
}

// A headless Chromium drives the console over a seeded catalogue: it
// searches a file known to be inside a package, opens the package, sees
// the hostile entry names as text, retries a dead letter with the button,
// and takes a screenshot.
func TestBrowserConsole(t *testing.T) {
	bin := chromium(t)
	t.Parallel()
	st, s := seeded(t)
	srv := consoleServer(t, st)
	ctx, dialogs := startBrowser(t, bin)
	must, text, screenshot := browserSteps(t, ctx)

	// Search for a file inside a package, by part of its name, in another case.
	must("search", chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(`input[name=q]`),
		chromedp.SendKeys(`input[name=q]`, "DRAGON_bust"),
		chromedp.Submit(`input[name=q]`),
		chromedp.WaitVisible(`input[name=q][value="DRAGON_bust"]`), // the search's page, not the one before
		chromedp.WaitVisible(`#results a.pkg`),
	))
	results := text(`#results`)
	if !strings.Contains(results, "models/dragons/Dragon_Bust.stl") || !strings.Contains(results, "minis-vol1.7z") {
		t.Fatalf("results do not show the file and its package:\n%s", results)
	}
	screenshot("search.png")

	// Open the package from the result.
	must("open package", chromedp.Do(ctx, chromedp.Click(`#results a.pkg`), chromedp.WaitVisible(`#listing`)))
	if heading, listing := text(`h1`), text(`#listing`); heading != "minis-vol1.7z" ||
		!strings.Contains(listing, "Dragon_Bust.stl") || !strings.Contains(listing, "dragons/") {
		t.Errorf("package page: heading %q, listing:\n%s", heading, listing)
	}

	// The hostile names render as text, not markup.
	must("hostile package", chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/console/package/"+itoa(s.Hostile)),
		chromedp.WaitVisible(`#listing`),
	))
	hostile := text(`#listing`)
	images, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('img').length`))
	must("count images", err)
	screenshot("hostile.png")
	if images != 0 || !strings.Contains(hostile, cataloguetest.Hostile) || !strings.Contains(hostile, `evil\x1b[31mred\nline.stl`) {
		t.Errorf("hostile names: %d img elements, listing:\n%s", images, hostile)
	}

	// Retry the dead letter from its button.
	must("retry", chromedp.Do(ctx,
		chromedp.Navigate(srv.URL+"/console/deadletters"),
		chromedp.WaitVisible(`button.retry`),
		chromedp.Click(`button.retry`),
		chromedp.WaitVisible(`#retried`),
	))
	if notice, state := text(`#retried`), text(`#deadletters td.state`); !strings.HasPrefix(notice, "1 dead letter") || state != "pending" {
		t.Errorf("after Retry: notice %q, state %q; want one scheduled, pending", notice, state)
	}
	dls, err := st.DeadLetters(t.Context(), store.DeadPending, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].Key != cataloguetest.DeadLetterKey || time.Until(dls[0].NextAttemptAt) > time.Minute {
		t.Errorf("pending dead letters %+v, want %v due now", dls, cataloguetest.DeadLetterKey)
	}
	if n := dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}

// consoleServer serves the console over st on a loopback test server.
func consoleServer(t *testing.T, st *store.Store) *httptest.Server {
	t.Helper()
	c := newConsole(t, web.Config{Catalogue: st})
	mux := http.NewServeMux()
	c.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// browserSteps returns the browser tests' step helpers: must fails the test
// on a step's error, text reads an element's text, screenshot saves the
// page.
func browserSteps(t *testing.T, ctx context.Context) (must func(string, error), text func(string) string, screenshot func(string)) {
	must = func(step string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	text = func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(sel))
		must("read "+sel, err)
		return s
	}
	screenshot = func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		must("screenshot", err)
		saveShot(t, name, png)
	}
	return must, text, screenshot
}

// startBrowser starts a headless Chromium for the test and returns its
// context and a count of the JavaScript dialogs it opens (markup that ran).
func startBrowser(t *testing.T, bin string) (context.Context, *atomic.Int32) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute) // a safety net only
	t.Cleanup(cancelTimeout)
	dialogs := new(atomic.Int32)
	err := chromedp.Listen(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			dialogs.Add(1)
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx, dialogs
}

// saveShot writes a screenshot under the test's temporary directory and,
// for the search page, also where EnvScreenshot says.
func saveShot(t *testing.T, name string, png []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot %s", path)
	if dst := os.Getenv(EnvScreenshot); dst != "" && name == "search.png" {
		if err := os.WriteFile(dst, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
