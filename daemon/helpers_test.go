package daemon_test

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"stashd/archive/archivetest"
	"stashd/sim/tgsim"

	"stashd/daemon"
	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// poolConns is the pool most tests run a daemon on. It is small: each
// connection costs the server a process of its own and its first reads of
// the catalogue's tables, some 75 ms of CPU on a two-core test machine,
// and a test's daemon opened a dozen of them on a pool of 16. Nothing in
// the daemon holds a connection while it waits, so four go round; a stage
// that held one would starve the others here first.
const poolConns = 4

// openStore opens a catalogue on a fresh test database, closed when the
// test ends.
func openStore(t testing.TB, conns int32) *store.Store {
	t.Helper()
	return openStoreAt(t, pgtest.New(t), conns)
}

// openStoreAt opens a catalogue on the database at url (conns zero: the
// store's default pool), closed when the test ends if not before.
func openStoreAt(t testing.TB, url string, conns int32) *store.Store {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: url, MaxConns: conns})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return st
}

// prepareAndRun starts d (Prepare, then Run), failing the test on error.
func prepareAndRun(t testing.TB, d *daemon.Daemon) {
	t.Helper()
	if err := d.Prepare(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.Run(); err != nil {
		t.Fatal(err)
	}
}

// waitHandled waits until key is handled for good (not a part waiting for
// its set) and the delivery queue is empty: ingest queues deliveries, the
// delivery stages send them. The daemon runs on its own goroutines and
// offers no signal per message; the poll is bounded and a passing run
// never waits out the deadline. A look that fails is tried again: the
// failover tests look while the server changes.
func waitHandled(t testing.TB, st *store.Store, key tg.MessageKey) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var last error // a failed look: the server may be failing over
	for {
		out, ok, err := st.MessageHandled(t.Context(), key)
		if err == nil && ok && out != store.OutcomePartPending {
			var n int
			if n, err = st.QueuedDeliveries(t.Context(), ""); err == nil && n == 0 {
				return
			}
		}
		last = cmp.Or(err, last)
		if time.Now().After(deadline) {
			t.Fatalf("message %s never handled and delivered (last failed look: %v)", key, last)
		}
		<-tick.C
	}
}

// postSets posts n three-part 7z sets (set0.7z.001…) in src and returns
// the keys of their last parts.
func postSets(world *tgsim.World, src tg.ChatID, n int) []tg.MessageKey {
	var last []tg.MessageKey
	for s := range n {
		whole := archivetest.SevenZip([]archivetest.File{{Name: "f", Data: []byte(strings.Repeat(fmt.Sprint(s), 5000))}})
		for i, part := range archivetest.Split(whole, 3) {
			m := world.Post(src, 0, tgsim.Post{FileName: fmt.Sprintf("set%d.7z.00%d", s, i+1), Data: part})
			if i == 2 {
				last = append(last, m.Key())
			}
		}
	}
	return last
}

// checkPartOrder fails the test unless dest holds want parts of the sets
// postSets posted, each set's parts in order.
func checkPartOrder(t *testing.T, world *tgsim.World, dest tg.ChatID, want int) {
	t.Helper()
	seen := map[string]int{} // set -> last part seen
	n := 0
	for _, m := range world.Messages(dest) {
		if m.Document == nil {
			continue
		}
		n++
		name := m.Document.FileName
		set, part := name[:4], int(name[len(name)-1]-'0')
		if part != seen[set]+1 {
			t.Errorf("destination %d: %s arrived after part %d of its set", dest, name, seen[set])
		}
		seen[set] = part
	}
	if n != want {
		t.Errorf("destination %d holds %d parts, want %d", dest, n, want)
	}
}

// mirror is a world with one account, "a", that reads the source "busy"
// and mirrors it into "mirror", and a daemon of that account (not started)
// whose metrics go to reg.
type mirror struct {
	world     *tgsim.World
	src, dest tg.ChatID
	reg       *prometheus.Registry
	d         *daemon.Daemon
}

// newMirror builds a mirror on st; cfg gives the daemon's settings beyond
// its account, destination, instance, drain timeout and registry.
func newMirror(t testing.TB, st *store.Store, seed int64, cfg daemon.Config) mirror {
	m := mirror{world: tgsim.NewWorld(tgsim.Config{Seed: seed, FilesDir: t.TempDir()}), reg: prometheus.NewRegistry()}
	m.world.AddAccount("a", false)
	m.src = m.world.AddChat(tg.KindChannel, "busy", "a")
	m.dest = m.world.AddChat(tg.KindChannel, "mirror", "a")
	cfg.Accounts = []daemon.Account{{Name: "a", Sources: []tg.ChatID{m.src}}}
	cfg.Destinations = []tg.ChatID{m.dest}
	cfg.Instance, cfg.DrainTimeout, cfg.Registry = "only", time.Second, m.reg
	m.d = daemon.New(cfg, st, func(context.Context, string) (tg.Client, error) { return m.world.Client("a"), nil })
	return m
}

// postTars posts n single-file tars named prefix00.tar… in the source and
// returns the last.
func (m mirror) postTars(prefix string, n int) tg.Message {
	var last tg.Message
	for i := range n {
		name := fmt.Sprintf("%s%02d.tar", prefix, i)
		last = m.world.Post(m.src, 0, tgsim.Post{FileName: name, Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})})
	}
	return last
}

// gather gathers the mirror's metrics once.
func (m mirror) gather(t testing.TB) []*dto.MetricFamily {
	t.Helper()
	mfs, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// metricIn returns the value, a gauge's or a counter's, of the series of
// name in mfs whose first label is label (any series of name when label
// is ""); ok is false when there is none.
func metricIn(mfs []*dto.MetricFamily, name, label string) (v float64, ok bool) {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && len(m.GetLabel()) > 0 && m.GetLabel()[0].GetValue() != label {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue(), true
			}
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// pair is a world of two accounts, a and b, that both read the source src;
// b reads its own source other too, and dest is a destination whose
// members newPair was given.
type pair struct {
	world            *tgsim.World
	src, other, dest tg.ChatID
}

func newPair(t testing.TB, seed int64, destMembers ...string) pair {
	return newPairOf(t, tgsim.Config{Seed: seed}, destMembers...)
}

// newPairOf is newPair on a world configured by cfg.
func newPairOf(t testing.TB, cfg tgsim.Config, destMembers ...string) pair {
	cfg.FilesDir = t.TempDir()
	p := pair{world: tgsim.NewWorld(cfg)}
	p.world.AddAccount("a", false)
	p.world.AddAccount("b", false)
	p.src = p.world.AddChat(tg.KindChannel, "news", "a", "b")
	p.other = p.world.AddChat(tg.KindChannel, "b's source", "b")
	p.dest = p.world.AddChat(tg.KindChannel, "mirror", destMembers...)
	return p
}

// accounts are the pair's accounts as a daemon runs them.
func (p pair) accounts() []daemon.Account {
	return []daemon.Account{{Name: "a", Sources: []tg.ChatID{p.src}}, {Name: "b", Sources: []tg.ChatID{p.other}}}
}

// dial dials the pair's accounts.
func (p pair) dial(_ context.Context, account string) (tg.Client, error) {
	return p.world.Client(account), nil
}

// postTars posts n one-file tars named prefix0.tar… in src.
func postTars(world *tgsim.World, src tg.ChatID, prefix string, n int) []tg.Message {
	var posted []tg.Message
	for i := range n {
		name := fmt.Sprintf("%s%02d.tar", prefix, i)
		posted = append(posted, world.Post(src, 0, tgsim.Post{FileName: name,
			Data: archivetest.Tar([]archivetest.File{{Name: name, Data: []byte(name)}})}))
	}
	return posted
}

// zipPost is a post of a zip named name holding one small file.
func zipPost(name string) tgsim.Post {
	return tgsim.Post{FileName: name, Data: archivetest.Zip([]archivetest.File{{Name: name + ".txt", Data: []byte(name)}})}
}

// countDocuments counts the documents dest holds.
func countDocuments(world *tgsim.World, dest tg.ChatID) int {
	n := 0
	for _, m := range world.Messages(dest) {
		if m.Document != nil {
			n++
		}
	}
	return n
}

// waitDocuments waits, bounded, until dest holds at least n documents.
func waitDocuments(t testing.TB, world *tgsim.World, dest tg.ChatID, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		k := countDocuments(world, dest)
		if k >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d packages reached the destination", k, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkOnce checks that dest holds each of posted's documents exactly once.
func checkOnce(t testing.TB, world *tgsim.World, dest tg.ChatID, posted []tg.Message) {
	t.Helper()
	count := map[string]int{}
	for _, m := range world.Messages(dest) {
		if m.Document != nil {
			count[m.Document.File.UniqueID]++
		}
	}
	for _, m := range posted {
		if c := count[m.Document.File.UniqueID]; c != 1 {
			t.Errorf("%s is in the destination %d times, want once", m.Document.FileName, c)
		}
	}
}
