package main

import (
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"stashd/internal/config"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// The configuration stashd sim writes is one stashd serve accepts, with the
// world's accounts, sources and destinations.
func TestSimConfigIsAServeConfig(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 3, FilesDir: t.TempDir()})
	gen := tgsim.NewGenerator(world, tgsim.Scenario{Seed: 3, Sources: 4, ForumTopics: 2, Accounts: 2, Destinations: 1})
	w := describeWorld("var/sim/tdjson.sock", 3, gen)
	p := filepath.Join(t.TempDir(), "sim.toml")
	if err := os.WriteFile(p, []byte(serveConfig(w, "var/sim/serve")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(p, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatalf("serve refuses the written configuration: %v\n%s", err, serveConfig(w, "var/sim/serve"))
	}
	if len(c.Accounts) != len(w.Accounts) || len(c.Destinations) != len(w.Destinations) {
		t.Errorf("accounts %d (world %d), destinations %d (world %d)", len(c.Accounts), len(w.Accounts), len(c.Destinations), len(w.Destinations))
	}
	n := 0
	for _, a := range c.Accounts {
		n += len(a.Sources)
	}
	if n != len(w.Sources) {
		t.Errorf("%d sources configured, the world has %d", n, len(w.Sources))
	}
}

// GET /truth answers requests addressed to loopback and refuses, with 421,
// one naming another host (a page rebound to 127.0.0.1).
func TestSimTruthRefusesForeignHost(t *testing.T) {
	world := tgsim.NewWorld(tgsim.Config{Seed: 5, FilesDir: t.TempDir()})
	gen := tgsim.NewGenerator(world, tgsim.Scenario{Seed: 5, Sources: 2, Accounts: 1, Destinations: 1})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serveAudit(ln, newSimFaults(world, gen, 5), slog.New(slog.DiscardHandler))
	t.Cleanup(func() { srv.Close() })
	get := func(host string) (int, string) {
		req, err := http.NewRequest("GET", "http://"+ln.Addr().String()+"/truth", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, host := range []string{"attacker.example", "attacker.example:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), "localhost.attacker.example"} {
		if code, body := get(host); code != http.StatusMisdirectedRequest {
			t.Errorf("Host %s: status %d body %.80q, want 421", host, code, body)
		}
	}
	for _, host := range []string{ln.Addr().String(), "localhost", "[::1]:1"} {
		code, body := get(host)
		if code != http.StatusOK || !json.Valid([]byte(body)) {
			t.Errorf("Host %s: status %d body %.80q, want 200 and the truth as JSON", host, code, body)
		}
	}
}

// serve --simulate downloads into the data directory as TDLib does: the
// simulator's download directories are 0700 and its files 0600.
func TestSimulatedDownloadsArePrivate(t *testing.T) {
	files := t.TempDir()
	world := tgsim.NewWorld(tgsim.Config{Seed: 7, FilesDir: files})
	world.AddAccount("alice", false)
	chat := world.AddChat(tg.KindChannel, "source", "alice")
	c := world.Client("alice")
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	if err := c.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.OpenChat(ctx, chat); err != nil {
		t.Fatal(err)
	}
	posted := world.Post(chat, 0, tgsim.Post{FileName: "a.zip", Data: make([]byte, 1000)})
	m, err := c.GetMessage(ctx, chat, posted.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DownloadFile(ctx, m.Document.File.ID); err != nil {
		t.Fatal(err)
	}
	var done tg.File
	for timeout := time.After(30 * time.Second); !done.DownloadDone; {
		select {
		case u := <-c.Updates():
			if f, ok := u.(tg.FileUpdated); ok {
				done = f.File
			}
		case <-timeout:
			t.Fatal("the download did not complete")
		}
	}
	err = filepath.WalkDir(files, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == files {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if info.Mode().Perm() != want {
			t.Errorf("%s: mode %04o, want %04o", p, info.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(done.LocalPath); err != nil {
		t.Errorf("downloaded file: %v", err)
	}
}
