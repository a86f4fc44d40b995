package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"stashd/store"
	"stashd/tg"
)

// rowsOf returns the rows of query (one package's, by $1) as values.
func rowsOf(t *testing.T, st *store.Store, query string, id int64) [][]any {
	t.Helper()
	rows, err := st.Pool().Query(t.Context(), query, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		v, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// CataloguePackage writes the rows the step-by-step writes wrote
// (CreatePackage, SetVerification, SetContentSignature, QueueDelivery,
// RecordMessages, ResolveDeadLetter), in one commit that also releases
// the locks it is given; a second one of the same content writes no
// package. Both of its ways: the steps of a package that may be there
// already, and the one statement of a package new to the catalogue
// (HashUnlocked), which fails on a content hash catalogued already.
func TestCataloguePackageWritesWhatTheStepsWrote(t *testing.T) {
	t.Parallel()
	for _, unlocked := range []bool{false, true} {
		t.Run(fmt.Sprintf("HashUnlocked=%v", unlocked), func(t *testing.T) {
			t.Parallel()
			catalogueWritesWhatTheStepsWrote(t, unlocked)
		})
	}
}

func catalogueWritesWhatTheStepsWrote(t *testing.T, unlocked bool) {
	st := open(t)
	ctx := t.Context()
	src := tg.ChatID(-100)
	files := []store.FileEntry{
		{Path: "dir", Dir: true},
		{Path: "dir/a.txt", Size: 3, CRC: 7, HasCRC: true},
		{Path: "dir/bad\xffname", Size: 5},
		{Path: "cut/long", Raw: "cut/longer-name", Size: 1, Flags: []string{store.FlagCut, store.FlagBidi}},
		{Path: "new\nline", Size: 2, Unsafe: true},
	}
	verif := store.Verification{Verified: true, NameLied: true, Suspicious: []string{"bomb"}}
	sig := []byte("signature")
	pkg := func(n byte) (store.Package, []store.Part) {
		sum := sha256.Sum256([]byte{n})
		key := tg.MessageKey{Chat: src, Message: tg.MessageIDFromServer(int64(n))}
		p := store.Package{ContentHash: sum[:], Name: "p\xff.zip", Format: "zip", TotalSize: 10, PartCount: 2,
			FileCount: len(files), Origin: key, Encrypted: true}
		parts := []store.Part{
			{Index: 0, FileName: "p.z01", Size: 4, SHA256: sum[:], UniqueID: "u" + string('a'+n), Source: key},
			{Index: 1, FileName: "p.zip", Size: 6, SHA256: sum[:], Source: key},
		}
		return p, parts
	}

	// The steps.
	p1, parts1 := pkg(1)
	old, _, err := st.CreatePackage(ctx, p1, parts1, files)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetVerification(ctx, old, verif); err != nil {
		t.Fatal(err)
	}
	if err := st.SetContentSignature(ctx, old, sig); err != nil {
		t.Fatal(err)
	}

	// One commit.
	p2, parts2 := pkg(2)
	dests := []tg.ChatID{-201, -202}
	var ws []store.Waiting
	for _, d := range dests {
		ws = append(ws, store.Waiting{Destination: d, Account: "a", Parts: []tg.MessageKey{p2.Origin}, PartCount: 2})
	}
	ws[1].Route, ws[1].OpensAt = "night", time.Now().Add(time.Hour).Truncate(time.Second)
	if err := st.RecordDeadLetter(ctx, store.DeadLetter{Key: p2.Origin, Account: "a", ErrorClass: "retryable", Reason: "x",
		NextAttemptAt: time.Now().Add(time.Hour)}, store.SourceMessage{Key: p2.Origin, Outcome: store.OutcomeDeadLetter}); err != nil {
		t.Fatal(err)
	}
	lock, err := st.Lock(ctx, "h:new")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	n := store.NewPackage{Package: p2, Parts: parts2, Files: files, Verification: verif, Signature: sig, RepackOf: old,
		Deliveries: ws, Sources: []store.SourceMessage{{Key: p2.Origin, FileName: "p.zip", Outcome: store.OutcomePackage}},
		Release: []*store.Lock{lock}, HashUnlocked: unlocked}
	got, err := st.CataloguePackage(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Created || got.ID == 0 || got.ID == old {
		t.Fatalf("catalogued %+v, want a new package", got)
	}
	if !slices.Equal(got.Queued, dests) {
		t.Errorf("queued %v, want %v", got.Queued, dests)
	}

	// The package row against the one the steps wrote (the verification
	// and the signature by their own writers).
	q := `SELECT name, format, total_size, part_count, file_count, listing_truncated, listing_error, name_raw <> '',
			encrypted, headers_encrypted, detected_format, verified, broken, name_lied, suspicious, content_sig
			FROM packages WHERE id = $1`
	if want, have := rowsOf(t, st, q, old), rowsOf(t, st, q, got.ID); len(want) == 0 || !reflect.DeepEqual(want, have) {
		t.Errorf("%s\n got %v\nwant %v", q, have, want)
	}
	// Parts, unique ids and listing as they must be stored: a name that is
	// not UTF-8 cleaned with its raw bytes in hex, a cut path with its
	// full name in hex, flags and CRCs kept.
	for q, want := range map[string]string{
		`SELECT idx, file_name, size, file_name_raw FROM package_parts WHERE package_id = $1 ORDER BY idx`: "[[0 p.z01 4 ] [1 p.zip 6 ]]",
		`SELECT idx FROM remote_files WHERE package_id = $1 ORDER BY idx`:                                  "[[0]]",
		`SELECT ord, path, size, is_dir, unsafe, path_raw, flags, crc FROM package_files WHERE package_id = $1 ORDER BY ord`: "[[0 dir 0 true false  [] <nil>] [1 dir/a.txt 3 false false  [] 7] " +
			"[2 dir/bad\uFFFDname 5 false true 6469722f626164ff6e616d65 [] <nil>] " +
			"[3 cut/long 1 false false 6375742f6c6f6e6765722d6e616d65 [cut bidi] <nil>] [4 new\nline 2 false true  [] <nil>]]",
	} {
		if have := fmt.Sprint(rowsOf(t, st, q, got.ID)); have != want {
			t.Errorf("%s\n got %q\nwant %q", q, have, want)
		}
	}
	// The search row as migration 008 computes it from the file rows.
	paths, names, err := store.SearchRowOf(ctx, st, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	if have := rowsOf(t, st, `SELECT paths, names FROM package_search WHERE package_id = $1`, got.ID); len(have) != 1 ||
		have[0][0] != paths || have[0][1] != names {
		t.Errorf("search row %q, want %q and %q", have, paths, names)
	}
	if links, err := st.PackageLinks(ctx, got.ID); err != nil || len(links) != 1 || links[0] != (store.PackageLink{Other: old, Kind: store.LinkRepack}) {
		t.Errorf("links %v, %v; want a repack of %d", links, err, old)
	}
	queued, err := st.DueWaiting(ctx, "a", time.Now().Add(2*time.Hour), 10)
	held := map[tg.ChatID]bool{}
	for _, w := range queued {
		if w.PackageID == got.ID {
			held[w.Destination] = !w.OpensAt.IsZero()
		}
	}
	if err != nil || len(held) != 2 || held[dests[0]] || !held[dests[1]] {
		t.Errorf("queue %+v, %v; want both deliveries of package %d, the second held", queued, err, got.ID)
	}
	var outcome string
	var recorded int64
	if err := st.Pool().QueryRow(ctx, `SELECT outcome, package_id FROM source_messages WHERE chat_id = $1 AND message_id = $2`,
		int64(src), int64(p2.Origin.Message)).Scan(&outcome, &recorded); err != nil || outcome != "package" || recorded != got.ID {
		t.Errorf("source recorded %q of package %d (%v), want package %d", outcome, recorded, err, got.ID)
	}
	if letters, err := st.DeadLetters(ctx, store.DeadResolved, 10); err != nil || len(letters) != 1 {
		t.Errorf("resolved dead letters %v, %v; want the source's", letters, err)
	}
	// The lock went with the commit.
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	again, err := st.Lock(short, "h:new")
	if err != nil {
		t.Fatalf("the lock released by the commit is still held: %v", err)
	}
	again.Unlock()

	// The same content again: no package written, the deliveries queued
	// already stay as they are.
	n.Release = nil
	second, err := st.CataloguePackage(ctx, n)
	if unlocked {
		if !errors.Is(err, store.ErrHashTaken) {
			t.Errorf("second catalogue without the hash's lock: %+v, %v; want ErrHashTaken", second, err)
		}
		second, err = store.Catalogued{ID: got.ID}, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if second.Created || second.ID != got.ID || len(second.Queued) != 0 {
		t.Errorf("second catalogue %+v, want package %d found, nothing queued", second, got.ID)
	}
	if parts := rowsOf(t, st, `SELECT idx FROM package_parts WHERE package_id = $1`, got.ID); len(parts) != 2 {
		t.Errorf("%d parts after the second catalogue, want 2", len(parts))
	}
}

// A package whose catalogue fails in any of its writes leaves nothing
// behind, and its locks held.
func TestCataloguePackageIsAllOrNothing(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	sum := sha256.Sum256([]byte("x"))
	key := tg.MessageKey{Chat: -1, Message: tg.MessageIDFromServer(1)}
	lock, err := st.Lock(ctx, "u:x")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	_, err = st.CataloguePackage(ctx, store.NewPackage{
		Package: store.Package{ContentHash: sum[:], Name: "x.zip", Format: "zip", PartCount: 1, Origin: key},
		Parts:   []store.Part{{FileName: "x.zip", SHA256: sum[:], UniqueID: "x", Source: key}},
		Files:   []store.FileEntry{{Path: "a"}},
		Sources: []store.SourceMessage{{Key: key, Outcome: "no such outcome"}},
		Release: []*store.Lock{lock},
	})
	if err == nil {
		t.Fatal("a catalogue with a bad source record succeeded")
	}
	if _, ok, err := st.PackageByHash(ctx, sum[:]); err != nil || ok {
		t.Errorf("package found %v (%v) after its catalogue failed", ok, err)
	}
	if _, ok, err := st.PackageOfPart(ctx, "x"); err != nil || ok {
		t.Errorf("unique id found %v (%v) after its catalogue failed", ok, err)
	}
	stillHeld(t, st, lock, "u:x", "a failed catalogue")
}

// stillHeld fails t unless lock, on name, is still held, neither released
// nor lost, after the work of what.
func stillHeld(t *testing.T, st *store.Store, lock *store.Lock, name, what string) {
	t.Helper()
	short, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if l, err := st.Lock(short, name); err == nil {
		l.Unlock()
		t.Errorf("the lock of %s was released", what)
	}
	select {
	case <-lock.Lost():
		t.Errorf("the lock of %s is lost", what)
	default:
	}
}

// A look sent with an attempt to take a lock reads what the lock's last
// holder committed when it let the lock go: a worker waiting for the
// content-hash lock of a package being catalogued finds the package.
func TestLockThenReadsUnderTheLock(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	sum := sha256.Sum256([]byte("contended"))
	key := tg.MessageKey{Chat: -1, Message: tg.MessageIDFromServer(1)}
	held, err := st.Lock(ctx, "h:contended")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	var found store.Found
	got := make(chan error, 1)
	go func() {
		l, err := st.LockThen(ctx, "h:contended", store.LookPackageByHash(sum[:], &found))
		if err == nil {
			l.Unlock()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("LockThen returned (%v) while another holder had the lock", err)
	case <-time.After(200 * time.Millisecond):
	}
	c, err := st.CataloguePackage(ctx, store.NewPackage{
		Package: store.Package{ContentHash: sum[:], Name: "c.zip", Format: "zip", PartCount: 1, Origin: key},
		Parts:   []store.Part{{FileName: "c.zip", SHA256: sum[:], UniqueID: "c", Source: key}},
		Release: []*store.Lock{held},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if !found.OK || found.ID != c.ID {
		t.Errorf("look under the lock found %+v, want package %d", found, c.ID)
	}
}

// A package catalogued without a lock on its content hash is refused,
// with nothing of it written and its locks still held, when the hash is
// another package's: catalogued already, or being catalogued by a unit
// in flight at the same moment.
func TestCataloguePackageWithoutHashLockRefusesATakenHash(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	newPackage := func(content string, msg int64, unique string, release ...*store.Lock) store.NewPackage {
		sum := sha256.Sum256([]byte(content))
		key := tg.MessageKey{Chat: -1, Message: tg.MessageIDFromServer(msg)}
		return store.NewPackage{
			Package:      store.Package{ContentHash: sum[:], Name: unique + ".zip", Format: "zip", PartCount: 1, Origin: key},
			Parts:        []store.Part{{FileName: unique + ".zip", SHA256: sum[:], UniqueID: unique, Source: key}},
			Sources:      []store.SourceMessage{{Key: key, Outcome: store.OutcomePackage}},
			Release:      release,
			HashUnlocked: true,
		}
	}
	first, err := st.CataloguePackage(ctx, newPackage("taken", 1, "first"))
	if err != nil || !first.Created {
		t.Fatalf("first catalogue = %+v, %v; want the package created", first, err)
	}
	lock, err := st.Lock(ctx, "u:second")
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	_, err = st.CataloguePackage(ctx, newPackage("taken", 2, "second", lock))
	if !errors.Is(err, store.ErrHashTaken) {
		t.Fatalf("catalogue of a taken hash = %v, want ErrHashTaken", err)
	}
	if _, ok, err := st.PackageOfPart(ctx, "second"); err != nil || ok {
		t.Errorf("the refused package's unique id is known (%v, %v)", ok, err)
	}
	var recorded int
	if err := st.Pool().QueryRow(ctx, `SELECT count(*) FROM source_messages WHERE message_id = $1`,
		int64(tg.MessageIDFromServer(2))).Scan(&recorded); err != nil || recorded != 0 {
		t.Errorf("the refused package's message recorded %d times (%v), want never", recorded, err)
	}
	stillHeld(t, st, lock, "u:second", "a refused catalogue")

	// Two units of one new hash at once, in one group commit or two: one
	// package, the other refused.
	for round := range 8 {
		content := fmt.Sprintf("race %d", round)
		errs := make(chan error, 2)
		for i := range 2 {
			go func() {
				_, err := st.CataloguePackage(ctx, newPackage(content, int64(10+2*round+i), fmt.Sprintf("r%d-%d", round, i)))
				errs <- err
			}()
		}
		var created, refused int
		for range 2 {
			switch err := <-errs; {
			case err == nil:
				created++
			case errors.Is(err, store.ErrHashTaken):
				refused++
			default:
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if created != 1 || refused != 1 {
			t.Errorf("round %d: %d created, %d refused; want one of each", round, created, refused)
		}
	}
}
