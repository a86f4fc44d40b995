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

// A plain x.zip or x.rar whose bytes list as a whole archive is a package
// at once, downloaded once by the worker that handles it: no wait for
// volumes that cannot exist, and no second download by the set sweeper.
func TestPlainZipOrRarThatListsWholeIsAPackageAtOnce(t *testing.T) {
	t.Parallel()
	files := []archivetest.File{{Name: "lone/data.bin", Data: []byte(strings.Repeat("l", 5000))}}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"lone.zip", archivetest.Zip(files)},
		{"lone.rar", archivetest.Rar(files)},
	} {
		e := newEnv(t, "a")
		p, c := e.pipeline("a")
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: tc.name, Data: tc.data}))
		mustHandle(t, p, m, store.OutcomePackage)
		if n := e.world.Calls("a")[tg.MethodDownloadFile]; n != 1 {
			t.Errorf("%s: %d downloads, want 1", tc.name, n)
		}
		e.now = e.now.Add(time.Hour)
		if res, err := p.Sweep(e.ctx); err != nil || res != (ingest.SweepResult{}) {
			t.Errorf("%s: sweep = %+v, %v; want nothing left to sweep", tc.name, res, err)
		}
		wantOnePackage(t, e, 1, tc.name)
	}
}

// A plain x.zip or x.rar whose bytes are not known to be whole waits like
// a part: the final x.zip of a split zip and the x.rar opening x.r00…
// seen before the rest of their sets, each then completed by its set as
// one package, even when its listing stops before the end that says a
// volume follows (a limit, encrypted headers); a broken zip, which only
// the absence of a set tells from a volume.
func TestPlainZipOrRarThatDoesNotListWholeWaitsAsAPart(t *testing.T) {
	t.Parallel()
	files := func(stem string) []archivetest.File {
		return []archivetest.File{{Name: stem + "/data.bin", Data: []byte(strings.Repeat(stem, 3000))}}
	}
	var many []archivetest.File
	for i := range 6 {
		many = append(many, archivetest.File{Name: fmt.Sprintf("many/%d.bin", i), Data: []byte(strings.Repeat("m", 2000))})
	}
	oneEntry := func(cfg *ingest.Config) { cfg.Limits.MaxEntries = 1 }
	for _, tc := range []struct {
		names []string
		vols  [][]byte
		first int // the plain name, handled first
		mod   func(*ingest.Config)
	}{
		{[]string{"split.z01", "split.z02", "split.zip"}, archivetest.ZipSplit(files("split"), 3), 2, nil},
		{[]string{"old.rar", "old.r00", "old.r01"}, archivetest.RarVolumes(files("old"), 3), 0, nil},
		{[]string{"many.rar", "many.r00", "many.r01"}, archivetest.RarVolumes(many, 3), 0, oneEntry},
		{[]string{"hidden.rar", "hidden.r00", "hidden.r01"}, [][]byte{archivetest.RarEncryptedHeaders(1),
			archivetest.RarEncryptedHeaders(2), archivetest.RarEncryptedHeaders(3)}, 0, nil},
		{[]string{"broken.zip"}, [][]byte{archivetest.Corrupt(archivetest.ZipTruncated, files("broken"))}, 0, nil},
	} {
		e := newEnv(t, "a")
		p, c, _ := e.pipelineWith("a", tc.mod, nil)
		var msgs []tg.Message
		for i, n := range tc.names {
			msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: tc.vols[i]})))
		}
		mustHandle(t, p, msgs[tc.first], store.OutcomePartPending)
		pkgs, err := e.st.PackageHashes(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(pkgs) != 0 {
			t.Fatalf("%v: %d packages after the plain name alone, want none", tc.names, len(pkgs))
		}
		if len(tc.names) == 1 {
			continue
		}
		for i, m := range msgs {
			if i != tc.first {
				mustHandle(t, p, m, store.OutcomePartPending)
			}
		}
		e.now = e.now.Add(2 * time.Minute)
		if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
			t.Fatalf("%v: sweep = %+v, %v; want the set completed", tc.names, res, err)
		}
		wantOnePackage(t, e, len(tc.names), fmt.Sprint(tc.names))
	}
}

// The final x.zip of a split zip whose first volumes are recorded already
// joins its set without a download: the first round trip tells it is a
// part. A plain x.zip that is a part of a known package is not downloaded
// either: it is a duplicate, or a part whose set path owes its package to
// the destinations of its source.
func TestFinalZipOfASetBegunCostsNoDownload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	msgs := postSplitZip(e, c, "begun")
	for _, m := range msgs {
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	if n := e.world.Calls("a")[tg.MethodDownloadFile]; n != 0 {
		t.Errorf("%d downloads before the set is complete, want 0", n)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}

	// The final volume forwarded alone to a second source while the set's
	// delivery is queued: a known package's part, told by the lock's round
	// trip before any download.
	other := e.world.AddChat(tg.KindChannel, "second source", "a")
	if err := e.st.EnsureSource(e.ctx, store.Source{ChatID: other, Account: "a"}); err != nil {
		t.Fatal(err)
	}
	downloads := e.world.Calls("a")[tg.MethodDownloadFile]
	fwd := e.view(c, e.world.Post(other, 0, tgsim.Post{FileName: "begun.zip", SameFileAs: msgs[2].Document.File.UniqueID}))
	mustHandle(t, p, fwd, store.OutcomeDuplicate)
	wantOnePackage(t, e, 3, "begun")
	// Forwarded to a source whose destination the package is not owed
	// to: a part, left to its set path (addKnownOrPart), as before its
	// bytes were looked at.
	elsewhere := e.world.AddChat(tg.KindChannel, "other mirror", "a")
	p2, c2, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Destinations = []tg.ChatID{elsewhere} }, nil)
	fwd2 := e.view(c2, e.world.Post(other, 0, tgsim.Post{FileName: "begun.zip", SameFileAs: msgs[2].Document.File.UniqueID}))
	mustHandle(t, p2, fwd2, store.OutcomePartPending)
	if n := e.world.Calls("a")[tg.MethodDownloadFile]; n != downloads {
		t.Errorf("the forwarded final volume was downloaded (%d downloads, want %d)", n, downloads)
	}
}

// A broken x.zip is downloaded twice when first handled: by the worker,
// whose listing fails, then by the sweeper, which dead-letters it. A
// retry of the dead letter (after an edit, or by hand) takes the set path
// alone: one download a try. So does an incomplete set's x.zip.
func TestBrokenPlainZipRetriedCostsOneDownloadATry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DeadLetterBroken = true }, nil)
	files := []archivetest.File{{Name: "broken/data.bin", Data: []byte(strings.Repeat("x", 3000))}}
	m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "broken.zip", Data: archivetest.Corrupt(archivetest.ZipTruncated, files)}))
	downloads := func() int { return e.world.Calls("a")[tg.MethodDownloadFile] }
	mustHandle(t, p, m, store.OutcomePartPending)
	for try, want := range []int{2, 3} {
		e.now = e.now.Add(2 * time.Minute)
		if res, err := p.Sweep(e.ctx); err != nil || res.DeadLetter != 1 {
			t.Fatalf("try %d: sweep = %+v, %v; want the broken zip dead-lettered", try, res, err)
		}
		if n := downloads(); n != want {
			t.Errorf("try %d: %d downloads, want %d", try, n, want)
		}
		mustHandle(t, p, m, store.OutcomePartPending) // the dead letter's retry
	}
}

// Locked ahead with its first volumes (catch-up's page), the final x.zip
// of a split zip joins its set without a download even when it is handled
// before them.
func TestFinalZipLockedAheadWithItsSetCostsNoDownload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	msgs := postSplitZip(e, c, "page")
	release := p.Prelock(e.ctx, msgs)
	defer release()
	for _, i := range []int{2, 0, 1} {
		mustHandle(t, p, msgs[i], store.OutcomePartPending)
	}
	if n := e.world.Calls("a")[tg.MethodDownloadFile]; n != 0 {
		t.Errorf("%d downloads before the set is complete, want 0", n)
	}
	e.now = e.now.Add(2 * time.Minute)
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Fatalf("sweep = %+v, %v; want the set completed", res, err)
	}
	wantOnePackage(t, e, 3, "page")
}

// A whole x.zip or x.rar beside a set of another naming scheme that shares
// its set key (x.zip.001…, x.part1.rar…), which never takes a plain name
// in, is a package of its own, and so is the set: whether the set's parts
// are recorded first or come locked ahead in its page.
func TestPlainNameBesideASetOfAnotherSchemeIsItsOwn(t *testing.T) {
	t.Parallel()
	files := func(name, fill string) []archivetest.File {
		return []archivetest.File{{Name: name, Data: []byte(strings.Repeat(fill, 5000))}}
	}
	for _, tc := range []struct {
		plain string
		whole []byte
		names []string
		vols  [][]byte
	}{
		{"pack.zip", archivetest.Zip(files("pack/whole.bin", "w")),
			[]string{"pack.zip.001", "pack.zip.002"}, archivetest.Split(archivetest.Zip(files("pack/split.bin", "s")), 2)},
		{"arc.rar", archivetest.Rar(files("arc/whole.bin", "w")),
			[]string{"arc.part1.rar", "arc.part2.rar"}, archivetest.RarVolumes(files("arc/split.bin", "s"), 2)},
	} {
		for _, ahead := range []bool{false, true} {
			e := newEnv(t, "a")
			p, c := e.pipeline("a")
			var msgs []tg.Message
			for i, n := range tc.names {
				msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: tc.vols[i]})))
			}
			plain := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: tc.plain, Data: tc.whole}))
			if ahead {
				release := p.Prelock(e.ctx, append(msgs, plain))
				mustHandle(t, p, plain, store.OutcomePackage)
				release()
			}
			for _, m := range msgs {
				mustHandle(t, p, m, store.OutcomePartPending)
			}
			if !ahead {
				mustHandle(t, p, plain, store.OutcomePackage)
			}
			e.now = e.now.Add(2 * time.Minute)
			if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
				t.Fatalf("%s (ahead %v): sweep = %+v, %v; want the set completed", tc.plain, ahead, res, err)
			}
			if pkgs, err := e.st.PackageHashes(e.ctx); err != nil || len(pkgs) != 2 {
				t.Errorf("%s (ahead %v): %d packages (%v), want 2", tc.plain, ahead, len(pkgs), err)
			}
		}
	}
}

// postSplitZip posts stem.z01, stem.z02 and stem.zip, a zip split in three,
// and returns them as client c sees them.
func postSplitZip(e *env, c *tgsim.Client, stem string) []tg.Message {
	vols := archivetest.ZipSplit([]archivetest.File{{Name: stem + "/data.bin", Data: []byte(strings.Repeat(stem, 3000))}}, 3)
	var msgs []tg.Message
	for i, ext := range []string{".z01", ".z02", ".zip"} {
		msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: stem + ext, Data: vols[i]})))
	}
	return msgs
}

// A whole x.rar or x.zip beside a stray volume of another set under the
// same name (x.r00, x.z01), the stray recorded first so that the plain
// name joins it as a part without a download, is judged by its bytes: a
// package of its own, delivered alone, whatever broken archives become;
// the stray waits for a set of its own and becomes a dead letter. Handled
// first, the plain name is a package at once, with the same end.
func TestWholePlainNameBesideAStrayVolumeIsItsOwn(t *testing.T) {
	t.Parallel()
	files := func(name, fill string) []archivetest.File {
		return []archivetest.File{{Name: name, Data: []byte(strings.Repeat(fill, 5000))}}
	}
	for _, tc := range []struct {
		plain, stray string
		whole, vol   []byte
	}{
		{"old.rar", "old.r00", archivetest.Rar(files("old/whole.bin", "w")), archivetest.RarVolumes(files("other/x.bin", "o"), 3)[1]},
		{"pack.zip", "pack.z01", archivetest.Zip(files("pack/whole.bin", "w")), archivetest.ZipSplit(files("other/x.bin", "o"), 3)[0]},
	} {
		for _, strayFirst := range []bool{true, false} {
			for _, deadLetterBroken := range []bool{true, false} {
				what := fmt.Sprintf("%s beside %s (stray first %v, broken archives dead-lettered %v)", tc.plain, tc.stray, strayFirst, deadLetterBroken)
				t.Run(what, func(t *testing.T) {
					t.Parallel()
					e := newEnv(t, "a")
					p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DeadLetterBroken = deadLetterBroken }, nil)
					post := func(name string, data []byte) tg.Message {
						return e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: data}))
					}
					var stray, plain tg.Message
					if strayFirst {
						stray = post(tc.stray, tc.vol)
						plain = post(tc.plain, tc.whole)
						mustHandle(t, p, stray, store.OutcomePartPending)
						mustHandle(t, p, plain, store.OutcomePartPending)
						e.now = e.now.Add(2 * time.Minute)
						if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 0 || res.Waiting != 1 {
							t.Fatalf("sweep = %+v, %v; want the set left waiting, its plain archive taken alone", res, err)
						}
					} else {
						plain = post(tc.plain, tc.whole)
						stray = post(tc.stray, tc.vol)
						mustHandle(t, p, plain, store.OutcomePackage)
						mustHandle(t, p, stray, store.OutcomePartPending)
					}
					sweepAndRetry(t, e, p, 2)
					logCatalogue(t, e)
					wantOnePackage(t, e, 1, what)
					pkgs, err := e.st.PackageHashes(e.ctx)
					if err != nil {
						t.Fatal(err)
					}
					for _, pk := range pkgs {
						full, err := e.st.GetPackage(e.ctx, pk.ID)
						if err != nil {
							t.Fatal(err)
						}
						if full.Name != tc.plain || full.ListingError != "" || full.FileCount != 1 {
							t.Errorf("package %q, %d files, listing error %q; want %s alone, listed whole", full.Name, full.FileCount, full.ListingError, tc.plain)
						}
					}
					if got := cataloguedPaths(t, e); len(got) != 1 {
						t.Errorf("catalogued entries %v; want the whole archive's one", got)
					}
					letters, err := e.st.DeadLetters(e.ctx, "", 10)
					if err != nil {
						t.Fatal(err)
					}
					if len(letters) != 1 || letters[0].Key != stray.Key() {
						t.Errorf("dead letters %+v; want the stray volume's alone", letters)
					}
				})
			}
		}
	}
}
