package tdjsonsim_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// buildStashd builds cmd/stashd (without TDLib: `stashd sim` needs none)
// into a temporary directory.
func buildStashd(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build stashd: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "stashd")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, "./cmd/stashd")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// `stashd sim` as a process of its own: it describes its world, publishes
// the seeded stream, serves it as TDLib JSON, and on SIGTERM closes its
// clients as TDLib closes and exits 0.
func TestSimCommandServesTheSeededWorld(t *testing.T) {
	t.Parallel()
	bin := buildStashd(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "tdjson.sock")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "sim", "--socket", sock, "--seed", "3", "--sources", "2", "--accounts", "1",
		"--steps", "12", "--rate", "-1", "--fail-downloads", "1")
	cmd.Env = append(os.Environ(), "STASHD_TDJSON_SOCKET=") // the flag decides
	logPath := filepath.Join(dir, "stderr.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("stashd sim's log:\n%s", b)
		}
	})
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	readJSON := func(v any) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stashd sim printed no line: %v", lines.Err())
		}
		if err := json.Unmarshal(lines.Bytes(), v); err != nil {
			t.Fatalf("stashd sim line %q: %v", lines.Text(), err)
		}
	}
	var desc struct {
		Socket   string   `json:"socket"`
		AuditURL string   `json:"audit_url"`
		Accounts []string `json:"accounts"`
		Sources  []struct {
			Chat    tg.ChatID `json:"chat"`
			Account string    `json:"account"`
		} `json:"sources"`
		Destinations []tg.ChatID `json:"destinations"`
	}
	readJSON(&desc)
	var pub struct {
		Published int `json:"published"`
	}
	readJSON(&pub)
	if desc.Socket != sock || !slices.Equal(desc.Accounts, []string{"acct1"}) || len(desc.Sources) != 2 || len(desc.Destinations) != 1 || pub.Published != 12 {
		t.Fatalf("stashd sim described %+v, published %+v", desc, pub)
	}

	// The same seed in-process: the process must serve the same messages.
	want := tgsim.NewWorld(tgsim.Config{Seed: 3})
	gen := tgsim.NewGenerator(want, tgsim.Scenario{Seed: 3, Sources: 2, Accounts: 1, Destinations: 1})
	for range 12 {
		gen.Step()
	}

	c := dialWire(t, sock)
	c.login(1, dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	total := 0
	var fileID int64
	for _, src := range desc.Sources {
		// The wire checks every object against TDLib's schema, the
		// process's as the in-process server's.
		if ch := c.ok(1, "getChat", map[string]any{"chat_id": src.Chat}, "chat"); ch.int("id") != int64(src.Chat) {
			t.Errorf("getChat %d: %v", src.Chat, ch)
		}
		found := c.ok(1, "searchChatMessages", map[string]any{"chat_id": src.Chat, "limit": 100}, "foundChatMessages")
		var got []tg.MessageID
		msgs, _ := found.get("messages").([]any)
		for _, m := range msgs {
			o := tdObject(m.(map[string]any))
			got = append(got, tg.MessageID(o.int("id")))
			if id := o.int("content", "document", "document", "id"); id != 0 {
				fileID = id
			}
		}
		var ids []tg.MessageID
		for _, m := range want.Messages(src.Chat) {
			ids = append([]tg.MessageID{m.ID}, ids...) // newest first, as search answers
		}
		if !slices.Equal(got, ids) {
			t.Errorf("source %d: served %v, the seed publishes %v", src.Chat, got, ids)
		}
		total += len(got)
	}
	if total == 0 || fileID == 0 {
		t.Fatal("the sources hold no document after 12 steps")
	}
	// --fail-downloads 1: every download ends as TDLib ends a failed one.
	c.send(1, "downloadFile", downloadParams(fileID))
	c.until("failed download", func(o tdObject) bool { return stopped(o, fileID) })

	// A second process logs acct1 in on a directory of its own and makes a
	// request; then the first makes one: two instances running one account
	// at once, which the ground truth reports.
	other := dialWire(t, sock)
	other.login(1, filepath.Join(dir, "second"), "acct1")
	other.ok(1, "getMe", nil, "user")
	c.ok(1, "getMe", nil, "user")
	resp, err := http.Get(desc.AuditURL)
	if err != nil {
		t.Fatal(err)
	}
	var truth struct {
		SessionOverlaps int `json:"session_overlaps"`
		Examples        []struct {
			Account string `json:"account"`
			Method  string `json:"method"`
		} `json:"session_overlap_examples"`
	}
	err = json.NewDecoder(resp.Body).Decode(&truth)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if truth.SessionOverlaps != 1 || len(truth.Examples) != 1 || truth.Examples[0].Account != "acct1" || truth.Examples[0].Method != "getMe" {
		t.Errorf("ground truth after an overlap: %+v, want one overlap of acct1's getMe", truth)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var states []string
	for o := c.next(); o != nil; o = c.next() {
		if o.typ() == "updateAuthorizationState" {
			states = append(states, o.str("authorization_state", "@type"))
		}
	}
	if !slices.Equal(states, []string{"authorizationStateClosing", "authorizationStateClosed"}) {
		t.Errorf("on SIGTERM the client saw %v, want Closing then Closed", states)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("stashd sim exit: %v", err)
	}
}
