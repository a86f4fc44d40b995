package audit

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"stashd/internal/cataloguetest"
	"stashd/internal/pgtest"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openStore opens a store on a fresh catalogue, closed when t ends.
func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// An account run by two sessions at once fails the audit, whatever else
// holds.
func TestCheckFailsOnSessionOverlaps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)

	clean, err := Check(ctx, st, Truth{})
	if err != nil {
		t.Fatal(err)
	}
	clean.Settled = true
	if !clean.OK() || clean.SessionOverlaps != 0 {
		t.Fatalf("empty world: OK %v, overlaps %d; want a pass", clean.OK(), clean.SessionOverlaps)
	}

	overlap := tgsim.SessionOverlap{Account: "acct1", Older: 3, Newer: 4, Method: "downloadFile"}
	rep, err := Check(ctx, st, Truth{SessionOverlaps: 2, OverlapExamples: []tgsim.SessionOverlap{overlap}})
	if err != nil {
		t.Fatal(err)
	}
	rep.Settled = true
	if rep.OK() || rep.SessionOverlaps != 2 {
		t.Errorf("two overlaps: OK %v, overlaps %d; want a failure counting 2", rep.OK(), rep.SessionOverlaps)
	}
	if len(rep.SessionOverlapNames) != 1 || !strings.Contains(rep.SessionOverlapNames[0], "acct1") {
		t.Errorf("overlap names = %q, want the example's account", rep.SessionOverlapNames)
	}
}

// A request made inside a flood wait Telegram asked for fails the audit,
// whatever else holds.
func TestCheckFailsOnFloodWaitBreaches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	breach := tgsim.FloodWaitBreach{Account: "acct1", Method: "sendMessage", Chat: -100, Left: 3 * time.Second, Resend: true}
	rep, err := Check(ctx, st, Truth{FloodWaitBreaches: 1, BreachExamples: []tgsim.FloodWaitBreach{breach}})
	if err != nil {
		t.Fatal(err)
	}
	rep.Settled = true
	if rep.OK() || rep.FloodWaitBreaches != 1 {
		t.Errorf("a request inside a flood wait: OK %v, breaches %d; want a failure counting 1", rep.OK(), rep.FloodWaitBreaches)
	}
	want := "account acct1: sendMessage to chat -100 (TDLib's re-send at a client's start) with 3s of a flood wait left"
	if len(rep.FloodWaitBreachNames) != 1 || rep.FloodWaitBreachNames[0] != want {
		t.Errorf("breach names = %q, want [%q]", rep.FloodWaitBreachNames, want)
	}
}

// A catalogued package the destinations lack is named with what the
// catalogue holds about its deliveries, so a failed audit says where the
// delivery went.
func TestMissingPackageNamesItsDeliveries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	seeded, err := cataloguetest.Seed(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	hashes, err := st.PackageHashes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var dragon Hash
	for h, p := range hashes {
		if p.ID == seeded.Dragon {
			dragon = h
		}
	}
	truth := Truth{
		Packages:     []Package{{Hash: dragon, Name: "dragon", Parts: []Part{{File: "f1"}, {File: "f2"}}}},
		Destinations: []Destination{{Chat: cataloguetest.Destination, Docs: []Doc{}}},
	}
	rep, err := Check(ctx, st, truth)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != 1 || len(rep.MissingNames) != 1 {
		t.Fatalf("missing %d %q; want the dragon package", rep.Missing, rep.MissingNames)
	}
	want := fmt.Sprintf("delivery to %d part 0: sent, message", cataloguetest.Destination)
	if !strings.Contains(rep.MissingNames[0], "catalogued true, delivered false") || !strings.Contains(rep.MissingNames[0], want) {
		t.Errorf("missing = %q; want the package's delivery rows (%q)", rep.MissingNames[0], want)
	}
}

// A package the catalogue lacks is named with what the catalogue holds
// about its messages, so a failed audit tells a set assembled from other
// messages than the ones posted together from messages never handled.
func TestUncataloguedPackageNamesItsMessages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := openStore(t)
	if _, err := cataloguetest.Seed(ctx, st); err != nil {
		t.Fatal(err)
	}
	parts := []Part{
		{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(10)}, // the dragon's first part
		{Chat: cataloguetest.SourceA, Message: tg.MessageIDFromServer(99)}, // never handled
	}
	truth := Truth{
		Packages:     []Package{{Hash: Hash{1}, Name: "album", Parts: parts}},
		Destinations: []Destination{{Chat: cataloguetest.Destination, Docs: []Doc{}}},
	}
	rep, err := Check(ctx, st, truth)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Missing != 1 || len(rep.MissingNames) != 1 {
		t.Fatalf("missing %d %q; want the album", rep.Missing, rep.MissingNames)
	}
	got := rep.MissingNames[0]
	for _, want := range []string{"catalogued false", "message 10: package", "'minis-vol1.7z', 2 parts, first message 10", "message 99: not handled"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing = %q; want it to say %q", got, want)
		}
	}
}
