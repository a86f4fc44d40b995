package ingest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// A part posted twice with different bytes (one copy damaged, same name
// and size, posted first; another part's copy cut short) is told apart by
// its content: the set is assembled from the copies that make it valid and
// delivered whole, and the other copies are recorded as rejected with the
// reason, never delivered.
func TestSetAssembledFromTheCopiesThatMakeItValid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	vols := archivetest.RarVolumes([]archivetest.File{{Name: "copies/data.bin", Data: []byte(strings.Repeat("c", 9000))}}, 3)
	damaged := slices.Clone(vols[1])
	damaged[12] ^= 0xFF
	posts := []namedPart{
		{"copies.part1.rar", vols[0]},
		{"copies.part2.rar", damaged},
		{"copies.part2.rar", vols[1]},
		{"copies.part3.rar", vols[2][:len(vols[2])/2]},
		{"copies.part3.rar", vols[2]},
	}
	msgs := postPending(t, e, p, c, posts)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 || res.DeadLetter != 0 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	sent := map[string]bool{}
	for _, d := range e.delivered() {
		sent[d.Document.File.UniqueID] = true
	}
	for i, m := range msgs {
		good := i == 0 || i == 2 || i == 4
		if sent[m.Document.File.UniqueID] != good {
			t.Errorf("%s (copy %d): delivered %v, want %v", m.Document.FileName, i, sent[m.Document.File.UniqueID], good)
		}
		var reason string
		if err := e.st.Pool().QueryRow(e.ctx, `SELECT coalesce((SELECT reason FROM rejected_parts
			WHERE chat_id = $1 AND message_id = $2), '')`, m.Key().Chat, m.Key().Message).Scan(&reason); err != nil {
			t.Fatal(err)
		}
		out, _, err := e.st.MessageHandled(e.ctx, m.Key())
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case good && (reason != "" || out != store.OutcomePackage && out != store.OutcomeDuplicate):
			t.Errorf("%s (copy %d): outcome %q, rejected %q; want it in the package", m.Document.FileName, i, out, reason)
		case !good && (reason == "" || out != store.OutcomeDuplicate):
			t.Errorf("%s (copy %d): outcome %q, rejected %q; want a rejected copy with its reason", m.Document.FileName, i, out, reason)
		}
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d parts, want the 3 valid ones", n)
	}
	pkg, ok, err := e.st.PackageByUniqueIDs(e.ctx, []string{msgs[0].Document.File.UniqueID,
		msgs[2].Document.File.UniqueID, msgs[4].Document.File.UniqueID})
	if err != nil || !ok {
		t.Fatalf("package of the valid copies: %v, %v", ok, err)
	}
	if v, err := e.st.GetVerification(e.ctx, pkg); err != nil || !v.Verified {
		t.Errorf("verification %+v, %v; want the chosen copies verified", v, err)
	}
}

// Two sets posted under the same names (two uploads named alike, one
// named in capitals, one with a zero-width space in its name), their parts
// interleaved, before a sweep: the names make one set, the bytes two.
// Each is catalogued and delivered whole; neither is taken for damaged
// copies of the other.
func TestTwoSetsUnderTheSameNamesAreBothDelivered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, second string }{
		{"same names", "twin"},
		{"capitals", "TWIN"},
		{"zero-width space", "tw\u200bin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "a")
			p, c := e.pipeline("a")
			first := archivetest.RarVolumes([]archivetest.File{{Name: "first/data.bin", Data: []byte(strings.Repeat("f", 9000))}}, 3)
			second := archivetest.RarVolumes([]archivetest.File{{Name: "second/data.bin", Data: []byte(strings.Repeat("s", 9000))}}, 3)
			var msgs []tg.Message
			for i := range 3 {
				for _, post := range []tgsim.Post{
					{FileName: fmt.Sprintf("twin.part%d.rar", i+1), Data: first[i]},
					{FileName: fmt.Sprintf("%s.part%d.rar", tc.second, i+1), Data: second[i]},
				} {
					m := e.view(c, e.world.Post(e.src["a"], 0, post))
					mustHandle(t, p, m, store.OutcomePartPending)
					msgs = append(msgs, m)
				}
			}
			completed := 0
			for range 3 {
				e.now = e.now.Add(2 * time.Minute)
				res, err := p.Sweep(e.ctx)
				if err != nil || res.DeadLetter != 0 {
					t.Fatalf("sweep = %+v, %v", res, err)
				}
				completed += res.Completed
			}
			if completed != 2 {
				t.Errorf("%d sets completed, want 2", completed)
			}
			sent := map[string]bool{}
			for _, d := range e.delivered() {
				sent[d.Document.File.UniqueID] = true
			}
			for _, m := range msgs {
				if !sent[m.Document.File.UniqueID] {
					t.Errorf("%s (message %d) was not delivered", m.Document.FileName, m.Key().Message)
				}
				if out, _, err := e.st.MessageHandled(e.ctx, m.Key()); err != nil || out != store.OutcomePackage {
					t.Errorf("%s (message %d): outcome %q, %v; want it in a package", m.Document.FileName, m.Key().Message, out, err)
				}
			}
			for _, set := range [][]tg.Message{{msgs[0], msgs[2], msgs[4]}, {msgs[1], msgs[3], msgs[5]}} {
				var ids []string
				for _, m := range set {
					ids = append(ids, m.Document.File.UniqueID)
				}
				if _, ok, err := e.st.PackageByUniqueIDs(e.ctx, ids); err != nil || !ok {
					t.Errorf("no package of %s: %v, %v", set[0].Document.FileName, ok, err)
				}
			}
		})
	}
}

// A volume of another upload posted under a set's part name before the
// set's own (a stray x.part2.rar, the same size, its headers valid and its
// volume number right) continues another file than the set's first volume
// leaves unfinished: the set is assembled from its own volumes, and the
// stray is a rejected copy, never delivered as a part of the set.
func TestStrayVolumeOfAnotherSetIsNotAssembled(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	own := archivetest.RarVolumes([]archivetest.File{{Name: "own/data.bin", Data: []byte(strings.Repeat("o", 9000))}}, 3)
	other := archivetest.RarVolumes([]archivetest.File{{Name: "oth/data.bin", Data: []byte(strings.Repeat("x", 9000))}}, 3)
	if len(other[1]) != len(own[1]) {
		t.Fatalf("the stray volume is %d bytes, the set's %d: want the same size", len(other[1]), len(own[1]))
	}
	posts := []namedPart{
		{"stray.part2.rar", other[1]},
		{"stray.part1.rar", own[0]},
		{"stray.part2.rar", own[1]},
		{"stray.part3.rar", own[2]},
	}
	msgs := postPending(t, e, p, c, posts)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	sent := map[string]bool{}
	for _, d := range e.delivered() {
		sent[d.Document.File.UniqueID] = true
	}
	for i, m := range msgs {
		if want := i > 0; sent[m.Document.File.UniqueID] != want {
			t.Errorf("%s (post %d, the stray: %v): delivered %v, want %v", m.Document.FileName, i, i == 0, sent[m.Document.File.UniqueID], want)
		}
	}
	var reason string
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT coalesce((SELECT reason FROM rejected_parts
		WHERE chat_id = $1 AND message_id = $2), '')`, msgs[0].Key().Chat, msgs[0].Key().Message).Scan(&reason); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(reason, "does not continue") {
		t.Errorf("the stray's rejection reason %q does not say it continues another file", reason)
	}
}

// namedPart is a part posted under a name.
type namedPart struct {
	name string
	data []byte
}

// postPending posts parts in source "a", each handled as a part that waits
// for its set, and moves the clock past the sweep's wait.
func postPending(t *testing.T, e *env, p *ingest.Pipeline, c *tgsim.Client, parts []namedPart) []tg.Message {
	t.Helper()
	var msgs []tg.Message
	for _, pt := range parts {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: pt.name, Data: pt.data}))
		mustHandle(t, p, m, store.OutcomePartPending)
		msgs = append(msgs, m)
	}
	e.now = e.now.Add(2 * time.Minute)
	return msgs
}
