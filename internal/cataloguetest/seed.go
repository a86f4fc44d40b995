package cataloguetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"time"

	"stashd/store"
	"stashd/tg"
)

// Chats and messages of the seeded catalogue.
const (
	SourceA     tg.ChatID = -1001000000001
	SourceB     tg.ChatID = -1001000000002
	Destination tg.ChatID = -1002000000001
	Account               = "alpha"
	// Hostile is a listed entry name that is markup.
	Hostile = "<img src=x onerror=alert(1)>.stl"
	// Control is a listed entry name with a terminal escape and a newline.
	Control = "evil\x1b[31mred\nline.stl"
)

// DeadLetterKey is the seeded exhausted dead letter.
var DeadLetterKey = tg.MessageKey{Chat: SourceB, Message: tg.MessageIDFromServer(77)}

// Seeded names the seeded packages by id.
type Seeded struct {
	// Dragon holds models/dragons/Dragon_Bust.stl and was delivered (two
	// parts, each sent to Destination); posted in SourceA, re-posted in
	// SourceB.
	Dragon int64
	// Terrain is a tar package named "dragon terrain pack" whose listing
	// does not mention dragons.
	Terrain int64
	// Hostile lists Hostile, Control and an unsafe ../escape.txt.
	Hostile int64
	// Others are filler packages named filler-N.zip, each listing
	// common/readme.txt.
	Others []int64
}

// Seed fills st (an empty, migrated catalogue) and returns the ids.
func Seed(ctx context.Context, st *store.Store) (Seeded, error) {
	var s Seeded
	if err := st.UpsertAccount(ctx, Account, 1, false); err != nil {
		return s, err
	}
	for _, c := range []tg.ChatID{SourceA, SourceB} {
		if err := st.EnsureSource(ctx, store.Source{ChatID: c, Account: Account, Kind: tg.KindChannel, Title: fmt.Sprintf("source %d", c)}); err != nil {
			return s, err
		}
	}
	mk := func(name, format string, size int64, origin tg.MessageKey, parts int, files []store.FileEntry) (int64, error) {
		sum := sha256.Sum256([]byte(name))
		var pts []store.Part
		for i := range parts {
			pts = append(pts, store.Part{Index: i, FileName: fmt.Sprintf("%s.%03d", name, i+1), Size: size / int64(parts),
				SHA256: sum[:], Source: tg.MessageKey{Chat: origin.Chat, Message: origin.Message + tg.MessageID(i)<<tg.ServerIDShift}})
		}
		id, _, err := st.CreatePackage(ctx, store.Package{ContentHash: sum[:], Name: name, Format: format, TotalSize: size,
			PartCount: parts, FileCount: len(files), Origin: origin}, pts, files)
		if err != nil {
			return 0, err
		}
		msg := store.SourceMessage{Key: origin, Date: time.Now(), FileName: name, FileSize: size, Outcome: store.OutcomePackage, PackageID: id}
		return id, st.RecordMessages(ctx, msg)
	}
	var err error
	s.Dragon, err = mk("minis-vol1.7z", "7z", 300<<20, tg.MessageKey{Chat: SourceA, Message: tg.MessageIDFromServer(10)}, 2,
		[]store.FileEntry{{Path: "models", Dir: true}, {Path: "models/dragons", Dir: true},
			{Path: "models/dragons/Dragon_Bust.stl", Size: 12 << 20}, {Path: "models/dragons/dragon_bust_base.stl", Size: 1 << 20},
			{Path: "models/knight.stl", Size: 5 << 20}})
	if err != nil {
		return s, err
	}
	repost := store.SourceMessage{Key: tg.MessageKey{Chat: SourceB, Message: tg.MessageIDFromServer(5)}, FileName: "minis-vol1.7z",
		Outcome: store.OutcomeDuplicate, PackageID: s.Dragon}
	if err := st.RecordMessages(ctx, repost); err != nil {
		return s, err
	}
	for part := range 2 {
		d, _, err := st.EnsureIntent(ctx, s.Dragon, Destination, part, Account)
		if err != nil {
			return s, err
		}
		if _, err := st.MarkSent(ctx, d, tg.MessageIDFromServer(int64(100+part))); err != nil {
			return s, err
		}
	}
	s.Terrain, err = mk("dragon terrain pack.tar", "tar", 40<<20, tg.MessageKey{Chat: SourceB, Message: tg.MessageIDFromServer(20)}, 1,
		[]store.FileEntry{{Path: "tiles/floor.stl", Size: 2 << 20}})
	if err != nil {
		return s, err
	}
	s.Hostile, err = mk("hostile.zip", "zip", 1<<20, tg.MessageKey{Chat: SourceA, Message: tg.MessageIDFromServer(30)}, 1,
		[]store.FileEntry{{Path: Hostile, Size: 100}, {Path: Control, Size: 200}, {Path: "escape.txt", Size: 5, Unsafe: true}})
	if err != nil {
		return s, err
	}
	for i := range 5 {
		id, err := mk(fmt.Sprintf("filler-%d.zip", i), "zip", int64(i+1)<<20,
			tg.MessageKey{Chat: SourceA, Message: tg.MessageIDFromServer(int64(40 + i))}, 1,
			[]store.FileEntry{{Path: "common/readme.txt", Size: 10}, {Path: "100%_done.txt", Size: 1}})
		if err != nil {
			return s, err
		}
		s.Others = append(s.Others, id)
	}
	err = st.RecordDeadLetter(ctx, store.DeadLetter{Key: DeadLetterKey, Account: Account, ErrorClass: "permanent",
		Reason: "download failed: <b>bad</b> part"}, store.SourceMessage{FileName: "broken.rar"})
	return s, err
}
