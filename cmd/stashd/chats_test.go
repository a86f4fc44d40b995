package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"stashd/internal/config"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// chatsWorld is a world with one account in a channel it posts to, a
// supergroup where it may only read, a forum with topics, an archived
// channel and one it lost access to.
type chatsWorld struct {
	world                                        *tgsim.World
	dest, readOnly, forum, archived, lost, other tg.ChatID
	topic                                        int64
}

func newChatsWorld(t *testing.T) chatsWorld {
	t.Helper()
	w := tgsim.NewWorld(tgsim.Config{Seed: 3})
	w.AddAccount("main", true)
	w.AddAccount("other", false)
	cw := chatsWorld{world: w}
	cw.dest = w.AddChat(tg.KindChannel, "Mirror", "main")
	w.SetUsername(cw.dest, "my_mirror")
	cw.readOnly = w.AddChat(tg.KindSupergroup, "Readers", "main")
	w.SetWriteAccess("main", cw.readOnly, false)
	cw.forum = w.AddChat(tg.KindForum, "Forum of files", "main")
	cw.topic = w.AddTopic(cw.forum, "Books")
	cw.archived = w.AddChat(tg.KindChannel, "Old stuff", "main")
	w.SetArchived(cw.archived, true)
	cw.lost = w.AddChat(tg.KindChannel, "Gone", "main")
	w.LoseAccess(cw.lost, true)
	cw.other = w.AddChat(tg.KindChannel, "Not mine", "other")
	return cw
}

func (cw chatsWorld) plan() plan {
	return worldPlan(cw.world, []string{"main"}, map[string][]tg.ChatID{"main": {cw.forum, cw.lost, cw.readOnly}},
		[]tg.ChatID{cw.dest}, nil)
}

func TestChatsListsBothListsWithRightsAndRoles(t *testing.T) {
	t.Parallel()
	cw := newChatsWorld(t)
	entries, err := listPlanChats(t.Context(), cw.plan(), "", "", true)
	if err != nil {
		t.Fatal(err)
	}
	by := map[tg.ChatID]chatEntry{}
	for _, e := range entries {
		by[tg.ChatID(e.ID)] = e
	}
	if _, ok := by[cw.other]; ok || len(entries) != 5 {
		t.Fatalf("want the 5 chats of account main, got %+v", entries)
	}
	want := map[tg.ChatID]chatEntry{
		cw.dest:     {Type: "channel", Title: "Mirror", Username: "my_mirror", List: "main", Membership: "administrator", CanPost: true, Admin: true, Role: "destination"},
		cw.readOnly: {Type: "supergroup", Title: "Readers", List: "main", Membership: "restricted", Role: "source"},
		cw.forum:    {Type: "forum", Title: "Forum of files", List: "main", Membership: "administrator", CanPost: true, Admin: true, CanManageTopics: true, Role: "source"},
		cw.archived: {Type: "channel", Title: "Old stuff", List: "archive", Membership: "administrator", CanPost: true, Admin: true, Role: "none"},
		cw.lost:     {Type: "channel", Title: "Gone", List: "main", Membership: "left", Role: "source"},
	}
	for id, w := range want {
		got := by[id]
		got.Topics, got.Account, got.ID = nil, "", 0
		if !reflect.DeepEqual(got, w) {
			t.Errorf("chat %d: got %+v, want %+v", id, got, w)
		}
	}
	if ts := by[cw.forum].Topics; len(ts) != 1 || ts[0].ThreadID != cw.topic || ts[0].Name != "Books" {
		t.Errorf("forum topics: %+v, want thread %d Books", ts, cw.topic)
	}

	// A filter on the title or the @username, ignoring case.
	entries, err = listPlanChats(t.Context(), cw.plan(), "", "MIRROR", false)
	if err != nil || len(entries) != 1 || tg.ChatID(entries[0].ID) != cw.dest || entries[0].Topics != nil {
		t.Errorf("filter MIRROR: %+v, %v", entries, err)
	}
	var out bytes.Buffer
	printChats(&out, entries, "MIRROR")
	if !strings.Contains(out.String(), "@my_mirror") || !strings.Contains(out.String(), "destination") {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	printChats(&out, nil, "zzz")
	if !strings.Contains(out.String(), `no chat matches "zzz"`) {
		t.Errorf("empty table: %q", out.String())
	}
}

// A role names a chat the configuration gives by @username too.
func TestChatsRoleByUsername(t *testing.T) {
	cw := newChatsWorld(t)
	p := cw.plan()
	p.destinations = nil
	p.accounts[0].sources = nil
	r := p.roles()
	if got := r.of(cw.dest, "my_mirror"); got != "none" {
		t.Fatalf("role without configuration: %s", got)
	}
	p2 := configPlan(configWith("@My_Mirror"), nil)
	if got := p2.roles().of(cw.dest, "my_mirror"); got != "destination" {
		t.Errorf("@My_Mirror as a destination: role %q", got)
	}
}

// The chats command's JSON has id, type, title and role for every chat.
func TestChatsCommandSimulatedJSON(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := chatsCommand(t.Context(), []string{"--simulate", "--data-dir", t.TempDir(), "--json"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var got struct {
		Chats []map[string]any `json:"chats"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	world, gen := simulatedWorld(1, t.TempDir())
	_ = world
	var wantIDs, gotIDs []int64
	for _, s := range gen.Sources() {
		wantIDs = append(wantIDs, int64(s.Chat))
	}
	for _, d := range gen.Destinations() {
		wantIDs = append(wantIDs, int64(d))
	}
	for _, c := range got.Chats {
		for _, k := range []string{"id", "type", "title", "role"} {
			if c[k] == nil || c[k] == "" {
				t.Errorf("chat without %s: %v", k, c)
			}
		}
		gotIDs = append(gotIDs, int64(c["id"].(float64)))
	}
	slices.Sort(wantIDs)
	slices.Sort(gotIDs)
	if !slices.Equal(wantIDs, gotIDs) {
		t.Errorf("chat ids %v, want the simulated sources and destinations %v", gotIDs, wantIDs)
	}
}

func configWith(destinations ...string) config.Config {
	return config.Config{Destinations: destinations}
}
