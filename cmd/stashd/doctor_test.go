package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"stashd/harness/demo"
	"stashd/internal/pgtest"
	"stashd/tg"
)

// Doctor names what is wrong and only that: a source the account lost, a
// source it only reads is fine, a destination no account may post to or
// create topics in.
func TestDoctorNamesFailingSourcesAndDestinations(t *testing.T) {
	t.Parallel()
	cw := newChatsWorld(t)
	p := cw.plan()
	// The read-only supergroup as a destination: nobody may post there.
	// The read-only supergroup as a destination: nobody may post there;
	// the forum as one that routes deliver into by topic name.
	p.destinations = append(p.destinations, planDestination{ref: p.accounts[0].sources[2]},
		planDestination{ref: p.accounts[0].sources[0], topics: true})
	dataDir := t.TempDir()
	if err := os.Chmod(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	d := &doctor{}
	d.run(t.Context(), doctorInput{plan: p, databaseURL: pgtest.New(t), dataDir: dataDir, budget: 1 << 20})
	rep := d.report()
	want := []string{"source " + itoa(cw.lost), "destination " + itoa(cw.readOnly)}
	if !slices.Equal(rep.Failed, want) {
		t.Errorf("failed %v, want %v; checks:\n%s", rep.Failed, want, doctorText(rep))
	}
	text := doctorText(rep)
	for _, s := range []string{"✓ database: migrated", "✓ database: writable", "✓ account main: logged in", "Premium (uploads up to 4000 MB)",
		"✗ source " + itoa(cw.lost) + ": accessible", "add account main to the chat again",
		"✓ destination " + itoa(cw.dest) + ": can post", "✓ destination " + itoa(cw.forum) + ": can post", "may create topics", "fix: make one of the accounts an administrator allowed to post"} {
		if !strings.Contains(text, s) {
			t.Errorf("doctor output lacks %q:\n%s", s, text)
		}
	}
}

func itoa(id tg.ChatID) string { return strconv.FormatInt(int64(id), 10) }

func doctorText(rep doctorReport) string {
	var b bytes.Buffer
	printDoctor(&b, rep)
	return b.String()
}

// The command exits 1 on a failed check, prints JSON, and never creates
// the embedded database it looks for; a configuration that does not parse
// is the first check, and the only one.
func TestDoctorCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "typo")
	var stdout, stderr bytes.Buffer
	code := doctorCommand(t.Context(), []string{"--simulate", "--data-dir", missing, "--json"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var rep doctorReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if !slices.Contains(rep.Failed, "database") || !slices.Contains(rep.Failed, "data dir") || slices.Contains(rep.Failed, "account acct1") {
		t.Errorf("failed %v", rep.Failed)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("doctor created %s", missing)
	}

	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("workers = -3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	code = doctorCommand(t.Context(), []string{"--config", bad}, &stdout, &stderr)
	if code != 1 || !strings.HasPrefix(stdout.String(), "✗ config: parses") || strings.Count(stdout.String(), "✗") != 1 {
		t.Errorf("exit %d:\n%s", code, stdout.String())
	}
}

// stashd demo --doctor: after settling, doctor fails exactly the sources
// the audit lists as inaccessible; --chats lists every source and
// destination the demo's daemon is configured with.
func TestDemoDoctorAndChats(t *testing.T) {
	t.Parallel()
	var in demoInspection
	dataDir := t.TempDir()
	if err := os.Chmod(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	var settled demo.Settled
	rep, err := demo.Run(t.Context(), demo.Options{Seed: 7, Steps: 80, Rate: -1, LoseAccess: 0.5,
		DatabaseURL: pgtest.New(t), FilesDir: filepath.Join(dataDir, "files"),
		Inspect: func(ctx context.Context, s demo.Settled) error {
			settled = s
			var err error
			in, err = inspectDemo(ctx, s, dataDir, true, true)
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || len(rep.InaccessibleSourceIDs) == 0 {
		t.Fatalf("want a passing audit with lost sources: %+v", rep)
	}
	b, err := in.addTo(rep)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Inaccessible []int64 `json:"inaccessible_source_ids"`
		Doctor       struct {
			Failed []string `json:"failed"`
		} `json:"doctor"`
		Chats []map[string]any `json:"chats"`
		OK    bool             `json:"ok"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, id := range got.Inaccessible {
		want = append(want, "source "+strconv.FormatInt(id, 10))
	}
	slices.Sort(want)
	failed := slices.Sorted(slices.Values(got.Doctor.Failed))
	if !got.OK || !slices.Equal(failed, want) {
		t.Errorf("doctor failed %v, want exactly the inaccessible sources %v", failed, want)
	}
	ids := map[int64]string{}
	for _, c := range got.Chats {
		for _, k := range []string{"id", "type", "title", "role"} {
			if c[k] == nil || c[k] == "" {
				t.Errorf("chat without %s: %v", k, c)
			}
		}
		ids[int64(c["id"].(float64))] = c["role"].(string)
	}
	for _, srcs := range settled.Sources {
		for _, s := range srcs {
			if ids[int64(s)] != "source" {
				t.Errorf("source %d: role %q", s, ids[int64(s)])
			}
		}
	}
	for _, d := range settled.Destinations {
		if ids[int64(d)] != "destination" {
			t.Errorf("destination %d: role %q", d, ids[int64(d)])
		}
	}
}

// An account whose network lets Telegram through only by a proxy: doctor
// names the unreachable account with the proxy hint, and passes once the
// account's proxy is set; the password never shows.
func TestDoctorReachThroughProxy(t *testing.T) {
	t.Parallel()
	cw := newChatsWorld(t)
	cw.world.RequireProxy("main", "px.example")
	p := cw.plan()
	d := &doctor{reach: 200 * time.Millisecond}
	c := d.account(t.Context(), p, "main")
	if c == nil {
		t.Fatal("no client")
	}
	c.Close()
	rep := d.report()
	if !slices.Equal(rep.Failed, []string{"account main"}) || !strings.Contains(doctorText(rep), "set a proxy") {
		t.Errorf("without a proxy:\n%s", doctorText(rep))
	}

	px, err := tg.ParseProxy("socks5://u:hunter2@px.example:1080")
	if err != nil {
		t.Fatal(err)
	}
	p.proxies["main"] = px
	d = &doctor{reach: 5 * time.Second}
	if c := d.account(t.Context(), p, "main"); c != nil {
		c.Close()
	}
	text := doctorText(d.report())
	if len(d.report().Failed) != 0 || !strings.Contains(text, "through proxy socks5://u:***@px.example:1080") || strings.Contains(text, "hunter2") {
		t.Errorf("through the proxy:\n%s", text)
	}
}
