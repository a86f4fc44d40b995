package store_test

import (
	"cmp"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"stashd/internal/pgtest"
	"stashd/store"
	"stashd/tg"
)

// commitEater relays a store's connections to PostgreSQL over a Unix
// socket of its own; once armed, it swallows the answer to the next COMMIT
// (the server committed) and drops that connection: a COMMIT whose answer
// is lost.
type commitEater struct {
	armed atomic.Bool
	ate   atomic.Bool
}

// relay starts the relay for url's server and returns the URL to use.
func (e *commitEater) relay(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("host") == "" || q.Get("host")[0] != '/' {
		t.Skip("the test database is not on a Unix socket")
	}
	// The port names the socket; without one in the URL the client takes
	// PGPORT's, or PostgreSQL's default.
	port := cmp.Or(q.Get("port"), os.Getenv("PGPORT"), "5432")
	target := filepath.Join(q.Get("host"), ".s.PGSQL."+port)
	dir, err := os.MkdirTemp("", "eater")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, ".s.PGSQL."+port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go e.answers(c, s)
		}
	}()
	q.Set("host", dir)
	u.RawQuery = q.Encode()
	return u.String()
}

// answers relays the server's messages to the client, but for the answer
// to a COMMIT once armed.
func (e *commitEater) answers(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	var head [5]byte
	for {
		if _, err := io.ReadFull(s, head[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
		if _, err := io.ReadFull(s, body); err != nil {
			return
		}
		if head[0] == 'C' && string(body) == "COMMIT\x00" && e.armed.CompareAndSwap(true, false) {
			e.ate.Store(true)
			return // committed; the client never hears it
		}
		if _, err := c.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}

// A COMMIT whose answer is lost (the connection drops after the server
// committed) fails every unit of its batch, and each caller retries: the
// retry of each store unit finds its work done. The intents are not
// fresh (the send path searches the destination for their tokens before
// sending), a sent record names the message recorded, a package is found
// catalogued, the queue keeps one row.
func TestUnitsRetriedAfterALostCommitFindTheirWork(t *testing.T) {
	t.Parallel()
	var eater commitEater
	st, err := store.Open(t.Context(), store.Config{URL: eater.relay(t, pgtest.New(t)),
		GroupCommitDelay: 300 * time.Millisecond, GroupCommitFlushes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	ctx := t.Context()
	const dest = tg.ChatID(-300)
	sent := onePartPackage(t, st, "sent", 1, 1<<20)
	fresh := onePartPackage(t, st, "fresh", 2, 2<<20)
	d, _, err := st.EnsureIntent(ctx, sent, dest, 0, "acc")
	if err != nil {
		t.Fatal(err)
	}
	hash := make([]byte, 32)
	hash[0] = 3
	origin := tg.MessageKey{Chat: -1, Message: 3 << 20}
	newPkg := store.NewPackage{Package: store.Package{ContentHash: hash, Name: "n.zip", Format: "zip", TotalSize: 1, PartCount: 1, Origin: origin},
		Parts:      []store.Part{{Index: 0, FileName: "n.zip", Size: 1, SHA256: hash, UniqueID: "n", Source: origin}},
		Deliveries: []store.Waiting{{Destination: dest, Account: "acc", Parts: []tg.MessageKey{origin}, PartCount: 1}}}

	eater.armed.Store(true)
	var wg sync.WaitGroup
	var intentErr, markErr, catErr error
	wg.Go(func() { _, intentErr = st.EnsureIntents(ctx, fresh, dest, []int{0}, "acc") })
	wg.Go(func() {
		_, markErr = st.MarkSentAll(ctx, []store.Delivery{d}, []tg.MessageID{tg.MessageIDFromServer(7)})
	})
	wg.Go(func() { _, catErr = st.CataloguePackage(ctx, newPkg) })
	wg.Wait()
	if !eater.ate.Load() || intentErr == nil || markErr == nil || catErr == nil {
		t.Fatalf("a batch whose COMMIT answer was lost (%v): intent %v, sent record %v, package %v; want all failed",
			eater.ate.Load(), intentErr, markErr, catErr)
	}

	ins, err := st.EnsureIntents(ctx, fresh, dest, []int{0}, "acc")
	if err != nil || len(ins) != 1 || ins[0].Fresh {
		t.Errorf("intents retried: %+v, %v; want the committed intent, not fresh", ins, err)
	}
	rec, err := st.MarkSentAll(ctx, []store.Delivery{d}, []tg.MessageID{tg.MessageIDFromServer(7)})
	if err != nil || rec[0] != tg.MessageIDFromServer(7) {
		t.Errorf("sent record retried: %v, %v; want message 7", rec, err)
	}
	got, err := st.CataloguePackage(ctx, newPkg)
	if err != nil || got.Created || got.ID == 0 {
		t.Errorf("package retried: %+v, %v; want found catalogued", got, err)
	}
	var parts, queued, deliveries int
	if err := st.Pool().QueryRow(ctx, `SELECT (SELECT count(*) FROM package_parts WHERE package_id = $1),
		(SELECT count(*) FROM waiting_deliveries WHERE package_id = $1), (SELECT count(*) FROM deliveries WHERE package_id = $2)`,
		got.ID, fresh).Scan(&parts, &queued, &deliveries); err != nil || parts != 1 || queued != 1 || deliveries != 1 {
		t.Errorf("after the retries: %d parts, %d queued, %d intents, %v; want one each", parts, queued, deliveries, err)
	}
}
