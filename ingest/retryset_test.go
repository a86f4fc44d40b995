package ingest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// incompleteSet is one kind of incomplete set as the generator posts it:
// the documents that were posted (name, data, album id).
type incompleteSet struct {
	name  string
	posts []tgsim.Post
}

func incompleteSets() []incompleteSet {
	files := func(stem string) []archivetest.File {
		return []archivetest.File{{Name: stem + "/data.bin", Data: []byte(strings.Repeat(stem, 3000))}}
	}
	rar := archivetest.RarVolumes(files("rs"), 3)
	sz := archivetest.Split(archivetest.SevenZip(files("sz")), 3)
	z1 := archivetest.ZipSplit(files("z1"), 3)
	zf := archivetest.ZipSplit(files("zf"), 3)
	alb := archivetest.RarVolumes(files("al"), 3)
	return []incompleteSet{
		{"rar part 2 missing", []tgsim.Post{
			{FileName: "rs.part1.rar", Data: rar[0]}, {FileName: "rs.part3.rar", Data: rar[2]}}},
		{"7z part 2 missing", []tgsim.Post{
			{FileName: "sz.7z.001", Data: sz[0]}, {FileName: "sz.7z.003", Data: sz[2]}}},
		{"zip split x.z01 missing", []tgsim.Post{
			{FileName: "z1.z02", Data: z1[1]}, {FileName: "z1.zip", Data: z1[2]}}},
		{"zip split x.zip missing", []tgsim.Post{
			{FileName: "zf.z01", Data: zf[0]}, {FileName: "zf.z02", Data: zf[1]}}},
		{"album with a rar set missing its last volume", []tgsim.Post{
			{FileName: "al.part1.rar", Data: alb[0], AlbumID: 91}, {FileName: "al.part2.rar", Data: alb[1], AlbumID: 91},
			{FileName: "notes.zip", Data: zipOf("notes.txt", "n"), AlbumID: 91}}},
	}
}

// Retrying the dead letters of an incomplete set, all of them or one
// part's alone (the console's Retry, with the set's other letters
// exhausted), must not deliver any part of it: the parts end as
// incomplete-set dead letters again.
func TestRetryingIncompleteSetDeliversNothing(t *testing.T) {
	t.Parallel()
	for _, set := range incompleteSets() {
		// which: -1 retries every letter, i the letter of part i alone.
		for which := -1; which < len(set.posts); which++ {
			one := which >= 0
			name := set.name + "/all letters"
			if one {
				name = fmt.Sprintf("%s/letter of %s", set.name, set.posts[which].FileName)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, "a")
				attempts := 0 // default cap: letters stay pending
				if one {
					attempts = 1 // every letter is exhausted at once
				}
				p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DeadLetterAttempts = attempts }, nil)
				var keys []tg.MessageKey
				for _, post := range set.posts {
					m := e.view(c, e.world.Post(e.src["a"], 0, post))
					mustHandle(t, p, m, store.OutcomePartPending)
					keys = append(keys, m.Key())
				}
				e.now = e.now.Add(2 * time.Hour)
				if res, err := p.Sweep(e.ctx); err != nil || res.DeadLetter != 1 {
					t.Fatalf("sweep = %+v, %v; want the set dead-lettered", res, err)
				}
				var key *tg.MessageKey
				if one {
					key = &keys[which]
				}
				if n, err := e.st.ScheduleDeadLetters(e.ctx, key); err != nil || n == 0 {
					t.Fatalf("schedule dead letters = %d, %v", n, err)
				}
				r := ingest.NewRetrier(ingest.RetryConfig{}, p, e.st, nil)
				if res, err := r.RunOnce(e.ctx); err != nil || res.Tried == 0 {
					t.Fatalf("retry = %+v, %v; want the scheduled letters tried", res, err)
				}
				e.now = e.now.Add(2 * time.Hour)
				if _, err := p.Sweep(e.ctx); err != nil {
					t.Fatalf("sweep after the retry: %v", err)
				}
				if d := e.delivered(); len(d) != 0 {
					var names []string
					for _, m := range d {
						names = append(names, m.Document.FileName)
					}
					t.Fatalf("retrying an incomplete set delivered %v", names)
				}
				if pkgs, err := e.st.PackageHashes(e.ctx); err != nil || len(pkgs) != 0 {
					t.Errorf("packages after the retry: %+v, %v; want none", pkgs, err)
				}
				dls, err := e.st.DeadLetters(e.ctx, "", 20)
				if err != nil {
					t.Fatal(err)
				}
				got := map[tg.MessageKey]store.DeadLetter{}
				for _, d := range dls {
					got[d.Key] = d
				}
				for _, k := range keys {
					d, ok := got[k]
					if !ok {
						t.Errorf("part %s is no dead letter after the retry", k)
						continue
					}
					if d.ErrorClass != "incomplete_set" || !strings.Contains(d.Reason, "incomplete set") {
						t.Errorf("part %s: letter %+v; want the incomplete-set reason", k, d)
					}
				}
				for _, k := range keys {
					out, ok, err := e.st.MessageHandled(e.ctx, k)
					if err != nil || !ok || out != store.OutcomeDeadLetter {
						t.Errorf("part %s: outcome %q (%v, %v); want dead_letter", k, out, ok, err)
					}
				}
			})
		}
	}
}

// A 406 while the retry loop fetches a dead letter's message is dropped
// silently, as TDLib asks: the letter keeps its reason, class and attempt
// count, and is taken again at the next look.
func TestRetryDropsIgnoredErrorSilently(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	vols := archivetest.RarVolumes([]archivetest.File{{Name: "q/data.bin", Data: []byte(strings.Repeat("q", 9000))}}, 3)
	m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "q.part2.rar", Data: vols[1]}))
	mustHandle(t, p, m, store.OutcomePartPending)
	e.now = e.now.Add(2 * time.Hour) // part 1 never came: the set expires
	if res, err := p.Sweep(e.ctx); err != nil || res.DeadLetter != 1 {
		t.Fatalf("sweep = %+v, %v; want the incomplete set dead-lettered", res, err)
	}
	before, err := e.st.DeadLetters(e.ctx, store.DeadPending, 10)
	if err != nil || len(before) != 1 {
		t.Fatalf("dead letters %+v, %v; want one", before, err)
	}
	e.world.InjectError("a", tg.MethodGetMessage, &tg.Error{Code: 406, Message: "CHANNEL_TOO_LARGE"}, 3)
	r := ingest.NewRetrier(ingest.RetryConfig{}, p, e.st, nil)
	for range 3 {
		if _, err := e.st.ScheduleDeadLetters(e.ctx, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := r.RunOnce(e.ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, err := e.st.DeadLetters(e.ctx, store.DeadPending, 10)
	if err != nil || len(after) != 1 {
		t.Fatalf("dead letters after 406s %+v, %v; want the same one, still pending", after, err)
	}
	if a, b := after[0], before[0]; a.ErrorClass != b.ErrorClass || a.Reason != b.Reason || a.Attempts != b.Attempts {
		t.Errorf("after 406s: class %q, reason %q, attempts %d; want %q, %q, %d unchanged",
			a.ErrorClass, a.Reason, a.Attempts, b.ErrorClass, b.Reason, b.Attempts)
	}
}
