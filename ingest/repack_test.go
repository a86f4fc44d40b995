package ingest_test

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// repackCount reads stashd_repacks_total{action} from reg.
func repackCount(t *testing.T, reg *prometheus.Registry, action string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "stashd_repacks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == action {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// settle handles m and, when it waits as a set (a zip may be the last
// volume of a split set), sweeps once it is quiet; it returns the outcome
// recorded for m.
func settle(t *testing.T, e *env, p *ingest.Pipeline, m tg.Message) store.Outcome {
	t.Helper()
	out, err := p.Handle(e.ctx, m)
	if err != nil {
		t.Fatalf("handle %s: %v", m.Key(), err)
	}
	if out == store.OutcomePartPending {
		e.now = e.now.Add(2 * time.Minute)
		if res, err := p.Sweep(e.ctx); err != nil || res.Completed != 1 {
			t.Fatalf("sweep = %+v, %v; want %s completed", res, err, m.Key())
		}
		got, ok, err := e.st.MessageHandled(e.ctx, m.Key())
		if err != nil || !ok {
			t.Fatalf("%s not recorded: %v", m.Key(), err)
		}
		out = got
	}
	return out
}

// packageOf returns the package message m is a part of.
func packageOf(t *testing.T, e *env, m tg.Message) int64 {
	t.Helper()
	var id int64
	if err := e.st.Pool().QueryRow(e.ctx, `SELECT package_id FROM package_parts
		WHERE source_chat_id = $1 AND source_message_id = $2`, m.ChatID, m.ID).Scan(&id); err != nil {
		t.Fatalf("package of %s: %v", m.Key(), err)
	}
	return id
}

// repackPipeline is account a's pipeline on a fresh client, handling
// repacks as mode says ("" the default), with the registry of its
// metrics.
func repackPipeline(t *testing.T, e *env, mode string) (*ingest.Pipeline, *tgsim.Client, *prometheus.Registry) {
	t.Helper()
	c := e.world.Client("a")
	if err := c.LoadChats(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	reg := prometheus.NewRegistry()
	cfg := ingest.Config{Account: "a", Destinations: []tg.ChatID{e.dest}, Repacks: mode,
		SetSettle: time.Minute, SetMaxWait: time.Hour, Now: func() time.Time { return e.now }}
	p := ingest.NewPipeline(cfg, e.st, tg.NewSession(c, func(tg.Update) {}), ingest.NewMetrics(reg))
	e.pipes = append(e.pipes, p)
	return p, c, reg
}

// A zip's files posted again as a 7z (other bytes, the same paths, sizes
// and CRCs) are a repack: linked to the zip's package in every mode, and
// the three modes differ in what they send and record. skip: catalogued
// as its own package, sent nowhere. deliver: sent like any package. link:
// sent nowhere, its post recorded as a copy of the zip's package.
func TestRepackModes(t *testing.T) {
	t.Parallel()
	files := []archivetest.File{
		{Name: "album/one.txt", Data: []byte(strings.Repeat("one ", 500))},
		{Name: "album/two.txt", Data: []byte(strings.Repeat("two ", 700))},
	}
	for _, tc := range []struct {
		mode, action string
		out          store.Outcome
		sent         int // documents in the destination at the end
	}{
		{"skip", ingest.RepackSkipped, store.OutcomePackage, 1},
		{"deliver", ingest.RepackDelivered, store.OutcomePackage, 2},
		{"link", ingest.RepackLinked, store.OutcomeDuplicate, 1},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, "a")
			p, c, reg := repackPipeline(t, e, tc.mode)

			orig := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "album.zip", Data: archivetest.Zip(files)}))
			if out := settle(t, e, p, orig); out != store.OutcomePackage {
				t.Fatalf("the zip: outcome %q", out)
			}
			if n := len(e.delivered()); n != 1 {
				t.Fatalf("the zip: %d documents delivered, want 1", n)
			}
			repack := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "album.7z", Data: archivetest.SevenZip(files)}))
			if out := settle(t, e, p, repack); out != tc.out {
				t.Errorf("repacks = %s: the 7z's outcome %q, want %q", tc.mode, out, tc.out)
			}
			if n := len(e.delivered()); n != tc.sent {
				t.Errorf("repacks = %s: %d documents delivered, want %d", tc.mode, n, tc.sent)
			}
			links, err := e.st.PackageLinks(e.ctx, packageOf(t, e, repack))
			if err != nil {
				t.Fatal(err)
			}
			if len(links) != 1 || links[0].Other != packageOf(t, e, orig) || links[0].Kind != store.LinkRepack {
				t.Errorf("repacks = %s: links %+v, want a repack of the zip's package", tc.mode, links)
			}
			if got := repackCount(t, reg, tc.action); got != 1 {
				t.Errorf("repacks = %s: stashd_repacks_total{action=%q} = %v, want 1", tc.mode, tc.action, got)
			}
		})
	}
}

// A package whose files are some of a catalogued package's (by path, size
// and CRC) is delivered, and linked as contained in the larger one, in
// whichever order the two come.
func TestContainedInLinkedEitherWay(t *testing.T) {
	t.Parallel()
	all := []archivetest.File{
		{Name: "set/a.txt", Data: []byte(strings.Repeat("a", 3000))},
		{Name: "set/b.txt", Data: []byte(strings.Repeat("b", 4000))},
		{Name: "set/c.txt", Data: []byte(strings.Repeat("c", 5000))},
	}
	for _, smallFirst := range []bool{false, true} {
		e := newEnv(t, "a")
		p, c := e.pipeline("a")
		post := func(name string, files []archivetest.File) tg.Message {
			m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: archivetest.Zip(files)}))
			if out := settle(t, e, p, m); out != store.OutcomePackage {
				t.Fatalf("%s: outcome %q", name, out)
			}
			return m
		}
		var big, small tg.Message
		if smallFirst {
			small, big = post("part.zip", all[:2]), post("whole.zip", all)
		} else {
			big, small = post("whole.zip", all), post("part.zip", all[:2])
		}
		if n := len(e.delivered()); n != 2 {
			t.Errorf("small first %v: %d documents delivered, want both", smallFirst, n)
		}
		links, err := e.st.PackageLinks(e.ctx, packageOf(t, e, small))
		if err != nil {
			t.Fatal(err)
		}
		if len(links) != 1 || links[0].Other != packageOf(t, e, big) || links[0].Kind != store.LinkContainedIn {
			t.Errorf("small first %v: links of the smaller package %+v, want contained in the larger", smallFirst, links)
		}
		if links, err := e.st.PackageLinks(e.ctx, packageOf(t, e, big)); err != nil || len(links) != 0 {
			t.Errorf("small first %v: links of the larger package %+v, %v; want none", smallFirst, links, err)
		}
	}
}

// A package contained in content that is catalogued twice (a 7z and its
// zip repack, both after it) is linked as contained in each copy: the
// repack is looked at too, not only the first.
func TestContainedInEveryCopyOfTheContent(t *testing.T) {
	t.Parallel()
	all := []archivetest.File{
		{Name: "lib/a.txt", Data: []byte(strings.Repeat("a", 3000))},
		{Name: "lib/b.txt", Data: []byte(strings.Repeat("b", 4000))},
	}
	e := newEnv(t, "a")
	p, c := e.pipeline("a")
	post := func(name string, data []byte) tg.Message {
		m := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: name, Data: data}))
		if out := settle(t, e, p, m); out != store.OutcomePackage {
			t.Fatalf("%s: outcome %q", name, out)
		}
		return m
	}
	small := post("lib-a.zip", archivetest.Zip(all[:1]))
	big7z := post("lib.7z", archivetest.SevenZip(all))
	bigZip := post("lib.zip", archivetest.Zip(all))
	links, err := e.st.PackageLinks(e.ctx, packageOf(t, e, small))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]bool{packageOf(t, e, big7z): true, packageOf(t, e, bigZip): true}
	for _, l := range links {
		if l.Kind == store.LinkContainedIn {
			delete(want, l.Other)
		}
	}
	if len(want) != 0 {
		t.Errorf("links of the smaller package %+v; not contained in %v", links, want)
	}
}

// forgedZip returns a zip whose directory claims files' CRCs over other
// bytes of the same sizes, declared bzip2-compressed (a method the
// listing does not decompress, so it cannot check them): a fake carrying
// a real release's listing.
func forgedZip(t *testing.T, files []archivetest.File) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	zw.RegisterCompressor(zip.Deflate+4, func(w io.Writer) (io.WriteCloser, error) { return nopWriteCloser{w}, nil }) // 12, bzip2
	var swaps [][2][]byte
	for _, f := range files {
		fake := bytes.ToUpper(f.Data)
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.Name, Method: zip.Deflate + 4})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(fake); err != nil {
			t.Fatal(err)
		}
		swaps = append(swaps, [2][]byte{le32(crc32.ChecksumIEEE(fake)), le32(crc32.ChecksumIEEE(f.Data))})
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	out := buf.Bytes()
	for _, s := range swaps {
		if bytes.Count(out, s[0]) != 2 { // the data descriptor's and the directory's
			t.Fatalf("forged zip: the fake CRC %x is not where expected", s[0])
		}
		out = bytes.ReplaceAll(out, s[0], s[1])
	}
	return out
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// A fake posted first with a real release's listing (its headers claim
// the release's CRCs over other bytes) does not make the release a
// skipped repack: the fake's CRCs were never checked against its bytes,
// so the release is linked to it and delivered. A repack of a package
// whose CRCs were checked is still skipped (TestRepackModes).
func TestFakeWithAReleasesListingDoesNotSuppressIt(t *testing.T) {
	t.Parallel()
	files := []archivetest.File{
		{Name: "release/readme.txt", Data: []byte(strings.Repeat("the real release ", 40))},
		{Name: "release/data.bin", Data: []byte(strings.Repeat("payload ", 90))},
	}
	e := newEnv(t, "a")
	p, c, reg := repackPipeline(t, e, "")

	fake := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "release.zip", Data: forgedZip(t, files)}))
	if out := settle(t, e, p, fake); out != store.OutcomePackage {
		t.Fatalf("the fake: outcome %q", out)
	}
	real := e.view(c, e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "release.zip", Data: archivetest.Zip(files)}))
	if out := settle(t, e, p, real); out != store.OutcomePackage {
		t.Fatalf("the release: outcome %q", out)
	}
	var delivered []string
	for _, m := range e.delivered() {
		delivered = append(delivered, m.Document.File.UniqueID)
	}
	if !slices.Contains(delivered, real.Document.File.UniqueID) {
		t.Errorf("the destination holds %d documents, not the release: the fake posted first suppressed it", len(delivered))
	}
	links, err := e.st.PackageLinks(e.ctx, packageOf(t, e, real))
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 1 || links[0].Other != packageOf(t, e, fake) || links[0].Kind != store.LinkRepack {
		t.Errorf("links %+v, want the release linked as a repack of the fake's listing", links)
	}
	if got := repackCount(t, reg, ingest.RepackDelivered); got != 1 {
		t.Errorf("stashd_repacks_total{action=delivered} = %v, want 1", got)
	}
}
