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

// A byte split pack.zip.001/002 and, beside it, a plain pack.zip whose
// bytes are not known to be whole (a broken zip): the plain name waits as
// a part under the set key it shares with the byte split, whose set never
// takes it in. The split is catalogued, and the plain name taken on its
// own.
func TestByteSplitBesideABrokenPlainZip(t *testing.T) {
	t.Parallel()
	files := func(name, fill string) []archivetest.File {
		return []archivetest.File{{Name: name, Data: []byte(strings.Repeat(fill, 5000))}}
	}
	e := newEnv(t, "a")
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DeadLetterBroken = true }, nil)
	vols := archivetest.Split(archivetest.Zip(files("pack/split.bin", "s")), 2)
	var msgs []tg.Message
	for i, n := range []string{"pack.zip.001", "pack.zip.002"} {
		msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: vols[i]})))
	}
	plain := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "pack.zip",
		Data: archivetest.Corrupt(archivetest.ZipTruncated, files("pack/other.bin", "o"))}))
	for _, m := range msgs {
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	out, err := p.Handle(e.ctx, plain)
	t.Logf("plain broken pack.zip: %v %v", out, err)
	sweepAndRetry(t, e, p, 4)
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var split bool
	for _, pk := range pkgs {
		t.Logf("package %q parts %d", pk.Name, pk.PartCount)
		if pk.PartCount == 2 {
			split = true
		}
	}
	if !split {
		t.Errorf("the valid byte split pack.zip.001/002 was never catalogued (%d packages)", len(pkgs))
	}
	logCatalogue(t, e)
}

// sweepAndRetry runs sweeps and dead-letter retries n times, two hours
// apart.
func sweepAndRetry(t *testing.T, e *env, p *ingest.Pipeline, n int) {
	t.Helper()
	r := ingest.NewRetrier(ingest.RetryConfig{}, p, e.st, nil)
	for i := 0; i < n; i++ {
		e.now = e.now.Add(2 * time.Hour)
		res, err := p.Sweep(e.ctx)
		if _, err := e.st.ScheduleDeadLetters(e.ctx, nil); err != nil {
			t.Fatal(err)
		}
		rr, rerr := r.RunOnce(e.ctx)
		t.Logf("round %d: sweep %+v %v; retry %+v %v", i, res, err, rr, rerr)
	}
}

// cataloguedPaths returns the paths listed in every package catalogued.
func cataloguedPaths(t *testing.T, e *env) map[string]bool {
	t.Helper()
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, pk := range pkgs {
		_, files := packageFiles(t, e, pk.Name)
		for _, f := range files {
			got[f.path] = true
		}
	}
	return got
}

// logCatalogue logs every source message's outcome and dead letter, and
// every package.
func logCatalogue(t *testing.T, e *env) {
	t.Helper()
	rows, err := e.st.Pool().Query(e.ctx, `SELECT sm.file_name, sm.outcome, coalesce(d.state,''), coalesce(d.reason,'')
		FROM source_messages sm LEFT JOIN dead_letters d ON d.chat_id = sm.chat_id AND d.message_id = sm.message_id ORDER BY sm.chat_id, sm.message_id`)
	if err != nil {
		t.Logf("dump: %v", err)
		return
	}
	for rows.Next() {
		var n, o, st, r string
		if err := rows.Scan(&n, &o, &st, &r); err != nil {
			t.Logf("dump: %v", err)
			return
		}
		t.Logf("  message %q: %s %s %s", n, o, st, r)
	}
	rows.Close()
	pkgs, _ := e.st.PackageHashes(e.ctx)
	for _, pk := range pkgs {
		full, _ := e.st.GetPackage(e.ctx, pk.ID)
		t.Logf("  package %d %q format %q parts %d files %d listing error %q", pk.ID, full.Name, full.Format, full.PartCount, full.FileCount, full.ListingError)
	}
}

// A split zip data.z01 + data.zip (its final volume, F), and beside it a
// whole, unrelated zip posted under the same name data.zip (W), smaller
// and larger than F. W's bytes say it is a whole archive: the set is
// made with F, and W, rejected as a copy of F's, is catalogued on its
// own.
func TestWholeZipNamedLikeASplitSetsFinal(t *testing.T) {
	t.Parallel()
	for _, wholeFill := range []int{10, 50000} { // W smaller, then larger, than F
		t.Run(fmt.Sprint(wholeFill), func(t *testing.T) {
			e := newEnv(t, "a")
			p, c := e.pipeline("a")
			vols := archivetest.ZipSplit([]archivetest.File{{Name: "split/member.bin", Data: []byte(randomish(20000))}}, 2)
			whole := archivetest.Zip([]archivetest.File{{Name: "whole/other.bin", Data: []byte(randomish(wholeFill))}})
			t.Logf("sizes: z01 %d, final %d, whole %d", len(vols[0]), len(vols[1]), len(whole))
			var msgs []tg.Message
			for _, post := range []tgsim.Post{{FileName: "data.z01", Data: vols[0]}, {FileName: "data.zip", Data: vols[1]}, {FileName: "data.zip", Data: whole}} {
				msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, post)))
			}
			for _, m := range msgs {
				out, err := p.Handle(e.ctx, m)
				t.Logf("handle %s: %v %v", m.Document.FileName, out, err)
			}
			sweepAndRetry(t, e, p, 2)
			logCatalogue(t, e)
			got := cataloguedPaths(t, e)
			if gotSplit, gotWhole := got["split/member.bin"], got["whole/other.bin"]; !gotSplit || !gotWhole {
				t.Errorf("catalogued the split set: %v, the whole zip: %v; want both", gotSplit, gotWhole)
			}
			if n := len(e.delivered()); n != 3 {
				t.Errorf("%d documents delivered, want 3 (the two volumes and the whole zip)", n)
			}
		})
	}
}

// randomish is n bytes that deflate does not shrink much.
func randomish(n int) string {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return string(b)
}

// Two different sets posted under the same names in two topics of one
// forum, their volumes interleaved: two packages.
func TestSetsOfOneNameInTwoTopics(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		names []string
		vols  func(fill string) [][]byte
	}{
		{[]string{"x.part1.rar", "x.part2.rar"}, func(fill string) [][]byte {
			return archivetest.RarVolumes([]archivetest.File{{Name: fill + "/d.bin", Data: []byte(strings.Repeat(fill, 9000))}}, 2)
		}},
		{[]string{"y.z01", "y.zip"}, func(fill string) [][]byte {
			return archivetest.ZipSplit([]archivetest.File{{Name: fill + "/d.bin", Data: []byte(strings.Repeat(fill, 9000))}}, 2)
		}},
		{[]string{"w.zip.001", "w.zip.002"}, func(fill string) [][]byte {
			return archivetest.Split(archivetest.Zip([]archivetest.File{{Name: fill + "/d.bin", Data: []byte(randomish(9000) + fill)}}), 2)
		}},
	} {
		t.Run(tc.names[0], func(t *testing.T) {
			e := newEnv(t, "a")
			forum := e.world.AddChat(tg.KindForum, "forum", "a")
			if err := e.st.EnsureSource(e.ctx, store.Source{ChatID: forum, Account: "a", Kind: tg.KindForum}); err != nil {
				t.Fatal(err)
			}
			ta, tb := e.world.AddTopic(forum, "A"), e.world.AddTopic(forum, "B")
			p, c := e.pipeline("a")
			va, vb := tc.vols("a"), tc.vols("b")
			var msgs []tg.Message
			for i, n := range tc.names {
				msgs = append(msgs, e.view(c, e.world.Post(forum, ta, tgsim.Post{FileName: n, Data: va[i]})))
				msgs = append(msgs, e.view(c, e.world.Post(forum, tb, tgsim.Post{FileName: n, Data: vb[i]})))
			}
			for _, m := range msgs {
				out, err := p.Handle(e.ctx, m)
				t.Logf("handle %s (topic %d): %v %v", m.Document.FileName, m.TopicID(), out, err)
			}
			sweepAndRetry(t, e, p, 2)
			logCatalogue(t, e)
			pkgs, err := e.st.PackageHashes(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(pkgs) != 2 {
				t.Errorf("%d packages, want 2", len(pkgs))
			}
			for _, pk := range pkgs {
				if pk.PartCount != 2 {
					t.Errorf("package %q of %d parts, want 2", pk.Name, pk.PartCount)
				}
			}
		})
	}
}

// Two whole, independent archives posted under the names of a two-part
// set are refused as one archive (the listing stopped at the first one's
// end, or took the first part for a self-extractor's stub, and catalogued
// it as the set), with a reason that says so: under the daemon's default
// (broken archives are dead letters) both parts are dead letters, and no
// package lists one archive's files as the set's.
func TestTwoWholeArchivesNamedAsOneSetAreRefused(t *testing.T) {
	t.Parallel()
	one := []archivetest.File{{Name: "first/one.bin", Data: []byte(randomish(3000))}}
	two := []archivetest.File{{Name: "second/two.bin", Data: []byte(randomish(4000))}}
	for _, tc := range []struct {
		names  []string
		data   [][]byte
		reason string
	}{
		{[]string{"x.part1.rar", "x.part2.rar"}, [][]byte{archivetest.Rar(one), archivetest.Rar(two)}, "volume 1 is the last of its archive"},
		{[]string{"x.zip.001", "x.zip.002"}, [][]byte{archivetest.Zip(one), archivetest.Zip(two)}, "the archive starts in part 2 of 2"},
		{[]string{"x.7z.001", "x.7z.002"}, [][]byte{archivetest.SevenZip(one), archivetest.SevenZip(two)}, "the archive ends in part 1 of 2"},
		{[]string{"x.tar.001", "x.tar.002"}, [][]byte{archivetest.Tar(one), archivetest.Tar(two)}, "another tar follows the archive's end"},
		{[]string{"x.tar.gz.001", "x.tar.gz.002"}, [][]byte{archivetest.TarGz(one), archivetest.TarGz(two)}, "another tar follows the archive's end"},
	} {
		t.Run(tc.names[0], func(t *testing.T) {
			e := newEnv(t, "a")
			p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DeadLetterBroken = true }, nil) // the daemon's default
			for i, n := range tc.names {
				m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: tc.data[i]}))
				mustHandle(t, p, m, store.OutcomePartPending)
			}
			sweepAndRetry(t, e, p, 2)
			logCatalogue(t, e)
			if got := cataloguedPaths(t, e); len(got) != 0 {
				t.Errorf("catalogued entries %v; want none", got)
			}
			letters, err := e.st.DeadLetters(e.ctx, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(letters) != 2 {
				t.Fatalf("%d dead letters, want the set's 2", len(letters))
			}
			for _, l := range letters {
				if !strings.Contains(l.Reason, tc.reason) {
					t.Errorf("dead letter of message %d: %q; want it to say %q", l.Key.Message.ServerID(), l.Reason, tc.reason)
				}
			}
		})
	}
}

// Two archives named as one set, one of them catalogued before: a listing
// that stopped at the first archive's end would give the set that
// archive's content signature, and skip it as its repack (repacks =
// "skip", the default), never delivering the other archive.
func TestArchivesNamedAsOneSetAreNoRepack(t *testing.T) {
	t.Parallel()
	one := []archivetest.File{{Name: "first/one.bin", Data: []byte(randomish(3000))}}
	two := []archivetest.File{{Name: "second/two.bin", Data: []byte(randomish(4000))}}
	for _, tc := range []struct {
		earlier     string // posted alone first: the archive the listing keeps
		earlierData []byte
		names       []string
		data        [][]byte
	}{
		{"one.7z", archivetest.SevenZip(one), []string{"x.7z.001", "x.7z.002"}, [][]byte{archivetest.SevenZip(one), archivetest.SevenZip(two)}},
		{"one.tar", archivetest.Tar(one), []string{"x.tar.001", "x.tar.002"}, [][]byte{archivetest.Tar(one), archivetest.Tar(two)}},
		{"two.zip", archivetest.Zip(two), []string{"x.zip.001", "x.zip.002"}, [][]byte{archivetest.Zip(one), archivetest.Zip(two)}},
	} {
		t.Run(tc.names[0], func(t *testing.T) {
			e := newEnv(t, "a")
			p, c := e.pipeline("a")
			mustHandle(t, p, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: tc.earlier, Data: tc.earlierData})), store.OutcomePackage)
			for i, n := range tc.names {
				m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: tc.data[i]}))
				mustHandle(t, p, m, store.OutcomePartPending)
			}
			sweepAndRetry(t, e, p, 2)
			logCatalogue(t, e)
			var names []string
			for _, m := range e.delivered() {
				names = append(names, m.Document.FileName)
			}
			t.Logf("delivered: %v", names)
			if len(names) != 3 {
				t.Errorf("delivered %v; want %s and both parts (the second archive is in no catalogued package delivered)", names, tc.earlier)
			}
		})
	}
}

// An album holding a byte split pack.zip.001/002 and a whole pack.zip:
// the split is listed as one archive, the plain pack.zip alone (a byte
// split never takes it in).
func TestAlbumByteSplitBesideAPlainZip(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	vols := archivetest.Split(archivetest.Zip([]archivetest.File{{Name: "split/member.bin", Data: []byte(randomish(6000))}}), 2)
	whole := archivetest.Zip([]archivetest.File{{Name: "whole/other.bin", Data: []byte(randomish(500))}})
	for _, post := range []tgsim.Post{{FileName: "pack.zip.001", Data: vols[0]}, {FileName: "pack.zip.002", Data: vols[1]}, {FileName: "pack.zip", Data: whole}} {
		post.AlbumID = 77
		mustHandle(t, p, e.view(c, e.world.Post(e.src["a"], 0, post)), store.OutcomePartPending)
	}
	sweepAndRetry(t, e, p, 1)
	logCatalogue(t, e)
	got := cataloguedPaths(t, e)
	if !got["pack.zip.001/split/member.bin"] || !got["pack.zip/whole/other.bin"] {
		t.Errorf("entries %v; want the split's member under pack.zip.001 and the whole zip's under pack.zip", got)
	}
}

// A RAR set arc.part1.rar, arc.part2.rar beside a plain arc.rar whose
// headers are encrypted (a whole archive whose bytes cannot say so: it
// waits as a part under the key the set shares): two packages.
func TestPartSetBesideAnEncryptedPlainRar(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	vols := archivetest.RarVolumes([]archivetest.File{{Name: "arc/split.bin", Data: []byte(strings.Repeat("s", 9000))}}, 2)
	for i, n := range []string{"arc.part1.rar", "arc.part2.rar"} {
		mustHandle(t, p, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: vols[i]})), store.OutcomePartPending)
	}
	mustHandle(t, p, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "arc.rar", Data: archivetest.RarEncryptedHeaders(7)})), store.OutcomePartPending)
	sweepAndRetry(t, e, p, 3)
	logCatalogue(t, e)
	if pkgs, err := e.st.PackageHashes(e.ctx); err != nil || len(pkgs) != 2 {
		t.Errorf("%d packages (%v); want 2: the RAR set and the encrypted arc.rar", len(pkgs), err)
	}
}
