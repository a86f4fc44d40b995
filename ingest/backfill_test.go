package ingest_test

import (
	"slices"
	"testing"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/route"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// A route added later delivers exactly the packages catalogued before it
// that it matches, once, resuming after a failure from where it stopped;
// removing a route deletes nothing.
func TestRouteAddedLaterBackfillsMatchingPackagesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	src := e.src["a"]
	d1 := e.world.AddChat(tg.KindChannel, "d1", "a")
	d2 := e.world.AddChat(tg.KindChannel, "d2", "a")
	all := route.Route{Name: "all", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{d1}}
	sevens := route.Route{Name: "7z", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{d2}, Filter: route.Filter{Formats: []string{"7z"}}}

	// The daemon ran with route "all" from the start.
	before := route.NewTable(nil, []route.Route{all})
	p, c, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = before }, nil)
	if err := ingest.NewBackfiller(ingest.BackfillConfig{}, p, e.st).Ensure(e.ctx); err != nil {
		t.Fatal(err)
	}
	var posted []tg.Message
	for _, name := range []string{"a.tar", "b.7z", "c.tar", "d.7z"} {
		var data []byte
		if name[2:] == "7z" {
			data = archivetest.SevenZip([]archivetest.File{{Name: name, Data: []byte(name)}})
		} else {
			data = archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})
		}
		m := e.view(c, e.world.Post(src, 0, tgsim.Post{FileName: name, Data: data}))
		mustHandle(t, p, m, store.OutcomePackage)
		posted = append(posted, m)
	}
	if n := len(documentsIn(e, d1)); n != 4 {
		t.Fatalf("d1 holds %d documents, want 4", n)
	}

	// Restarted with route "7z" added.
	after := route.NewTable(nil, []route.Route{all, sevens})
	p2, c2, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = after }, nil)
	bf := ingest.NewBackfiller(ingest.BackfillConfig{Rate: 60000, Batch: 1}, p2, e.st)
	if err := bf.Ensure(e.ctx); err != nil {
		t.Fatal(err)
	}
	// A package posted once the route exists is routed at ingest, not by
	// the backfill.
	late := e.view(c2, e.world.Post(src, 0, tgsim.Post{FileName: "e.7z", Data: archivetest.SevenZip([]archivetest.File{{Name: "e", Data: []byte("e")}})}))
	mustHandle(t, p2, late, store.OutcomePackage)

	// The first walk stops at a retryable failure on b.7z.
	e.world.InjectError("a", tg.MethodGetMessage, &tg.Error{Code: 500, Message: "Internal Server Error"}, 1)
	if _, err := bf.RunOnce(e.ctx); err == nil {
		t.Fatal("backfill went on past a retryable failure")
	}
	b := backfillOf(t, e, "7z")
	if b.Done() || b.Remaining != 3 || b.Walked != 1 {
		t.Fatalf("after the failure the backfill shows %+v; want a.tar walked and 3 packages remaining", b)
	}
	status, err := e.st.Status(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(status.Backfills, func(s store.BackfillStatus) bool { return s.Route == "7z" }); i < 0 ||
		status.Backfills[i].Remaining != 3 || status.Backfills[i].DoneAt != nil {
		t.Errorf("status shows backfills %+v; want route 7z backfilling with 3 packages remaining", status.Backfills)
	}
	res, err := bf.RunOnce(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Walked != 3 || res.Matched != 2 || res.Delivered != 2 {
		t.Errorf("resumed walk = %+v; want 3 walked, 2 matched and delivered", res)
	}
	want := []string{posted[1].Document.File.UniqueID, posted[3].Document.File.UniqueID, late.Document.File.UniqueID}
	got := documentsIn(e, d2)
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("d2 holds %v, want the three 7z archives once each %v", got, want)
	}
	b = backfillOf(t, e, "7z")
	if !b.Done() || b.Matched != 2 || b.Delivered != 2 || b.Remaining != 0 {
		t.Errorf("finished backfill shows %+v", b)
	}
	if res, err := bf.RunOnce(e.ctx); err != nil || res.Walked != 0 {
		t.Errorf("a finished backfill walked again: %+v, %v", res, err)
	}

	// Route "7z" removed again: nothing is deleted, nothing walked.
	p3, _, _ := e.pipelineWith("a", func(cfg *ingest.Config) { cfg.Routes = before }, nil)
	if res, err := ingest.NewBackfiller(ingest.BackfillConfig{}, p3, e.st).RunOnce(e.ctx); err != nil || res.Walked != 0 {
		t.Errorf("after removing a route: %+v, %v", res, err)
	}
	if n := len(documentsIn(e, d2)); n != 3 {
		t.Errorf("d2 holds %d documents after its route was removed, want 3", n)
	}
}

func backfillOf(t *testing.T, e *env, name string) store.Backfill {
	t.Helper()
	bs, err := e.st.Backfills(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no backfill of route %q in %+v", name, bs)
	return store.Backfill{}
}
