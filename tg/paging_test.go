package tg_test

import (
	"fmt"
	"testing"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// Paging forward over short pages (TDLib may return fewer messages than
// asked, keeping the newest) still sees every document exactly once.
func TestDocumentsAfterSurvivesShortPages(t *testing.T) {
	t.Parallel()
	for _, rate := range []float64{0, 0.5, 1} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			t.Parallel()
			w := tgsim.NewWorld(tgsim.Config{Seed: 9, ShortPageRate: rate})
			w.AddAccount("a", false)
			chat := w.AddChat(tg.KindChannel, "c", "a")
			var want []tg.MessageID
			for i := range 350 {
				if i%3 == 0 {
					w.Post(chat, 0, tgsim.Post{Text: "text"})
				}
				want = append(want, w.Post(chat, 0, tgsim.Post{FileName: fmt.Sprintf("%d.zip", i), Data: []byte{byte(i)}}).ID)
			}
			c := w.Client("a")
			defer c.Close()
			if err := c.LoadChats(t.Context()); err != nil {
				t.Fatal(err)
			}
			var got []tg.MessageID
			after := int64(0)
			for range 1000 {
				page, err := tg.DocumentsAfter(t.Context(), c, chat, after, 100)
				if err != nil {
					t.Fatal(err)
				}
				if len(page) == 0 {
					break
				}
				for _, m := range page {
					got = append(got, m.ID)
				}
				after = page[len(page)-1].ID.ServerID()
			}
			if len(got) != len(want) {
				t.Fatalf("paged %d documents, want %d", len(got), len(want))
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("document %d = %d, want %d", i, got[i], want[i])
				}
			}
		})
	}
}
