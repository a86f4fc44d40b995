package ingest

import (
	"context"
	"testing"
	"time"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// After a download stopped, a message that cannot be read because the
// account lost its source is not taken for deleted at source: the
// download's error stands (the message is retried) and the loss is
// reported for catch-up to record. A message really gone is deleted at
// source.
func TestSourceGoneTellsLostAccessFromDeletion(t *testing.T) {
	ctx := context.Background()
	w := tgsim.NewWorld(tgsim.Config{Seed: 7, FilesDir: t.TempDir()})
	w.AddAccount("a", false)
	src := w.AddChat(tg.KindChannel, "releases", "a")
	kept := w.Post(src, 0, tgsim.Post{FileName: "a.zip", Data: []byte("PK a")})
	gone := w.Post(src, 0, tgsim.Post{FileName: "b.zip", Data: []byte("PK b")})
	c := w.Client("a")
	defer c.Close()
	sess := tg.NewSession(c, func(tg.Update) {})
	if err := sess.LoadChats(ctx); err != nil {
		t.Fatal(err)
	}
	var lost []tg.ChatID
	p := &Pipeline{tg: sess, cfg: Config{AccessLost: func(chat tg.ChatID) { lost = append(lost, chat) },
		Views: tg.NewViews(sess.OpenChat, time.Millisecond)}}

	gm, err := sess.GetMessage(ctx, src, gone.ID)
	if err != nil {
		t.Fatal(err)
	}
	km, err := sess.GetMessage(ctx, src, kept.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.Delete(src, gone.ID)
	// The session does not follow the source: its database has not heard
	// of the deletion, and the message reads as it was.
	if err := p.sourceGone(ctx, gm); err != nil {
		t.Errorf("deleted message the session has not heard of: %v, want nil (the download's error stands)", err)
	}
	// A download finds the file gone: TDLib's file reference repair reads
	// the message from the server, and the database learns it is gone.
	if _, err := sess.DownloadFile(ctx, gm.Document.File.ID); err != nil {
		t.Fatal(err)
	}
	if err := p.sourceGone(ctx, gm); !deletedAtSource(err) {
		t.Errorf("deleted message: %v, want deleted at source", err)
	}
	w.LoseAccess(src, true)
	if err := p.sourceGone(ctx, km); err != nil {
		t.Errorf("message out of reach: %v, want nil (the download's error stands)", err)
	}
	if len(lost) != 1 || lost[0] != src {
		t.Errorf("sources reported lost = %v, want [%d]", lost, src)
	}
}
