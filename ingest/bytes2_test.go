package ingest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ulikunitz/xz"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// failNth fails the nth download of the file with unique id uid once
// (a connection reset).
type failNth struct {
	*tg.Session
	mu    sync.Mutex
	uid   string
	n     int
	count int
}

func (f *failNth) Download(ctx context.Context, file tg.File, stall time.Duration) (tg.File, error) {
	f.mu.Lock()
	if file.UniqueID == f.uid {
		f.count++
		if f.count == f.n {
			f.mu.Unlock()
			return tg.File{}, errors.New("connection reset")
		}
	}
	f.mu.Unlock()
	return f.Session.Download(ctx, file, stall)
}

// A tar.xz whose stream holds an index after the tar's end (as pixz
// writes it), byte-split as x.tar.xz.001/002: one archive, catalogued as
// a package of two parts.
func TestIndexedTarXzByteSplitIsOnePackage(t *testing.T) {
	t.Parallel()
	var files []archivetest.File
	for i := range 20 {
		files = append(files, archivetest.File{Name: fmt.Sprintf("d/f%d.bin", i), Data: []byte(randomish(300*i + 1))})
	}
	var buf bytes.Buffer
	xw, err := xz.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	index := bytes.Repeat([]byte("d/f0.bin\x00\x10\x00"), 50)
	if _, err := xw.Write(append(archivetest.Tar(files), index...)); err != nil {
		t.Fatal(err)
	}
	if err := xw.Close(); err != nil {
		t.Fatal(err)
	}
	vols := archivetest.Split(buf.Bytes(), 2)
	e := newEnv(t, "a")
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DeadLetterBroken = true }, nil) // the daemon's default
	for i, n := range []string{"x.tar.xz.001", "x.tar.xz.002"} {
		mustHandle(t, p, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: vols[i]})), store.OutcomePartPending)
	}
	sweepAndRetry(t, e, p, 2)
	logCatalogue(t, e)
	pkgs, err := e.st.PackageHashes(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 1 || len(cataloguedPaths(t, e)) != len(files) {
		t.Fatalf("%d packages, %d paths; want one package listing %d files", len(pkgs), len(cataloguedPaths(t, e)), len(files))
	}
	for _, pk := range pkgs {
		if pk.PartCount != 2 {
			t.Errorf("package of %d parts, want 2", pk.PartCount)
		}
	}
}

// An album of three archives: two whole 7z named y.7z.001/y.7z.002 and a
// readme.zip. The two are not one archive, so each is listed on its own,
// and the album is one package of its three documents.
func TestAlbumOfArchivesNamedAsOneSetIsOnePackage(t *testing.T) {
	t.Parallel()
	one := []archivetest.File{{Name: "first/one.bin", Data: []byte(randomish(3000))}}
	two := []archivetest.File{{Name: "second/two.bin", Data: []byte(randomish(4000))}}
	e := newEnv(t, "a")
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.DeadLetterBroken = true }, nil)
	for _, post := range []tgsim.Post{{FileName: "y.7z.001", Data: archivetest.SevenZip(one)}, {FileName: "y.7z.002", Data: archivetest.SevenZip(two)},
		{FileName: "readme.zip", Data: zipOf("readme.txt", "read me")}} {
		post.AlbumID = 99
		mustHandle(t, p, e.view(c, e.world.Post(e.src["a"], 0, post)), store.OutcomePartPending)
	}
	sweepAndRetry(t, e, p, 2)
	logCatalogue(t, e)
	pkgs, _ := e.st.PackageHashes(e.ctx)
	if len(pkgs) != 1 {
		t.Errorf("%d packages; want the album as one package", len(pkgs))
	}
	if got := cataloguedPaths(t, e); !got["y.7z.001/first/one.bin"] || !got["y.7z.002/second/two.bin"] || !got["readme.zip/readme.txt"] {
		t.Errorf("album listing %v; want each archive's files", got)
	}
	if n := len(e.delivered()); n != 3 {
		t.Errorf("delivered %d documents, want 3", n)
	}
}

// An album's document that arrives while the album is being dead-lettered
// brings the album back together (deadLetterSet's late parts), whatever
// the naming scheme of its file name: an album is one set.
func TestLateAlbumDocumentJoinsItsDeadLetteredAlbum(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	c := e.world.Client("a")
	if err := c.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	st := &lateParts{Store: e.st}
	p := ingest.NewPipeline(ingest.Config{
		Account: "a", Destinations: []tg.ChatID{e.dest},
		SetSettle: time.Minute, SetMaxWait: time.Hour, RetryBase: time.Millisecond, DeadLetterBroken: true,
		Now: func() time.Time { return e.now },
	}, st, tg.NewSession(c, func(tg.Update) {}), nil)
	e.pipes = append(e.pipes, p)
	var msgs []tg.Message
	for _, post := range []tgsim.Post{
		{FileName: "a.zip.001", Data: zipOf("a.txt", "a")},
		{FileName: "b.zip", Data: archivetest.Corrupt(archivetest.ZipTruncated, []archivetest.File{{Name: "b.txt", Data: []byte(strings.Repeat("b", 5000))}})},
	} {
		post.AlbumID = 66
		msgs = append(msgs, e.view(c, e.world.Post(e.src["a"], 0, post)))
	}
	mustHandle(t, p, msgs[0], store.OutcomePartPending)
	mustHandle(t, p, msgs[1], store.OutcomePartPending)
	st.arrive = func() {
		late := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "c.zip", Data: zipOf("c.txt", "c"), AlbumID: 66}))
		mustHandle(t, p, late, store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Hour)
	res, err := p.Sweep(e.ctx)
	t.Logf("sweep: %+v %v", res, err)
	logCatalogue(t, e)
	pending, err := e.st.SetParts(e.ctx, e.src["a"], 0, "album:66")
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) == 1 {
		t.Errorf("the album's late document %q is pending alone while the album's other documents are dead letters: the album is split", pending[0].FileName)
	}
}

// A stray volume x.z01 has waited an hour under the key "set:x.zip"; a
// byte split x.zip.001/002 is posted now and its first download fails
// once (a retryable error). The split has waited two minutes, not
// SetMaxWait: it is retried at the next sweep, not dead-lettered.
func TestSetExpiresByItsOwnAge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	fl := &failNth{n: 1}
	p, c, _ := e.pipelineWith("a", nil, func(s *tg.Session) ingest.Telegram { fl.Session = s; return fl })
	stray := archivetest.ZipSplit([]archivetest.File{{Name: "other/d.bin", Data: []byte(randomish(9000))}}, 2)[0]
	mustHandle(t, p, e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "x.z01", Data: stray})), store.OutcomePartPending)
	if _, err := e.st.Pool().Exec(e.ctx, `UPDATE source_messages SET handled_at = handled_at - interval '61 minutes' WHERE file_name = 'x.z01'`); err != nil {
		t.Fatal(err)
	}
	vols := archivetest.Split(archivetest.Zip([]archivetest.File{{Name: "split/m.bin", Data: []byte(randomish(9000))}}), 2)
	for i, n := range []string{"x.zip.001", "x.zip.002"} {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: n, Data: vols[i]}))
		if i == 0 {
			fl.uid = m.Document.File.UniqueID
		}
		mustHandle(t, p, m, store.OutcomePartPending)
	}
	e.now = e.now.Add(2 * time.Minute)
	res, err := p.Sweep(e.ctx)
	t.Logf("sweep: %+v %v", res, err)
	logCatalogue(t, e)
	if res.DeadLetter != 0 || res.Failed != 1 {
		t.Errorf("sweep %+v: want the byte split, posted two minutes ago, failed and kept for the next sweep (SetMaxWait is its own, not the stray x.z01's)", res)
	}
	if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
		t.Errorf("next sweep %+v, %v: want the byte split completed", res, err)
	}
}
