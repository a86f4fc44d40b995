package ingest_test

import (
	"strconv"
	"strings"
	"testing"

	"stashd/archive/archivetest"
	"stashd/ingest"
	"stashd/internal/caption"
	"stashd/sim/tgsim"
	"stashd/store"
	"stashd/tg"
)

// captionOf delivers one posted archive through a pipeline configured by
// mod and returns the caption it was sent with.
func captionOf(t *testing.T, e *env, mod func(*ingest.Config), post tgsim.Post) (string, tg.Message) {
	t.Helper()
	p, c, _ := e.pipelineWith("a", mod, nil)
	posted := e.world.Post(e.src["a"], 0, post)
	if _, err := p.Handle(e.ctx, e.view(c, posted)); err != nil {
		t.Fatal(err)
	}
	e.deliver()
	d := e.delivered()
	if len(d) != 1 {
		t.Fatalf("destination holds %d documents, want 1", len(d))
	}
	return d[0].Caption, posted
}

func TestCaptionTemplateFillsEveryPlaceholder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	tmpl, err := caption.Parse("{name} · {size} · from {source} on {date} · {link}")
	if err != nil {
		t.Fatal(err)
	}
	got, posted := captionOf(t, e, func(c *ingest.Config) { c.Caption = tmpl },
		tgsim.Post{FileName: "photos.7z", Data: sevenOf("a.txt", strings.Repeat("x", 3000))})
	lines := strings.Split(got, "\n")
	tok := ingest.TokenOf(got)
	if tok == "" || lines[len(lines)-1] != ingest.TokenPrefix+tok {
		t.Fatalf("caption %q: the token is not its last line", got)
	}
	want := "photos.7z · " + caption.HumanSize(posted.Document.File.Size) +
		" · from source of a on " + posted.Date.UTC().Format("2006-01-02") + " · " + tg.MessageLink(e.src["a"], posted.ID, 0)
	if lines[0] != want {
		t.Errorf("caption's first line = %q, want %q", lines[0], want)
	}
}

func TestCaptionNamesPublicSourceByUsername(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	tmpl, _ := caption.Parse("{source} {link}")
	got, posted := captionOf(t, e, func(c *ingest.Config) {
		c.Caption = tmpl
		c.SourceUsernames = map[tg.ChatID]string{e.src["a"]: "pubsrc"}
	}, tgsim.Post{FileName: "x.7z", Data: sevenOf("a.txt", "hello")})
	want := "@pubsrc https://t.me/pubsrc/" + strconv.FormatInt(int64(posted.ID.ServerID()), 10)
	if first, _, _ := strings.Cut(got, "\n"); first != want {
		t.Errorf("caption's first line = %q, want %q", first, want)
	}
}

func TestCaptionDefaultLooksAsBefore(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	got, _ := captionOf(t, e, nil, tgsim.Post{FileName: "plain.7z", Data: sevenOf("a.txt", "hello")})
	if first, _, _ := strings.Cut(got, "\n"); first != "plain.7z" {
		t.Errorf("default caption's first line = %q, want the package name alone", first)
	}
}

func TestCaptionTooLongIsCutNeverTheToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	tmpl, _ := caption.Parse(strings.Repeat("très long texte ", 200) + "{name}")
	got, _ := captionOf(t, e, func(c *ingest.Config) { c.Caption = tmpl },
		tgsim.Post{FileName: "long.7z", Data: sevenOf("a.txt", "hello")})
	if n := caption.Units(got); n > caption.Limit {
		t.Fatalf("caption is %d units long, over Telegram's %d", n, caption.Limit)
	}
	lines := strings.Split(got, "\n")
	if tok := ingest.TokenOf(got); tok == "" || lines[len(lines)-1] != ingest.TokenPrefix+tok {
		t.Fatalf("cut caption lost its token line: %q", got[max(0, len(got)-80):])
	}
	if !strings.HasSuffix(lines[0], "…") {
		t.Errorf("cut template text does not end in an ellipsis: %q", lines[0][max(0, len(lines[0])-20):])
	}
}

func TestCaptionOfBrokenArchiveSaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "a")
	whole := archivetest.SevenZip([]archivetest.File{{Name: "a.bin", Data: []byte(strings.Repeat("data", 500))}})
	got, _ := captionOf(t, e, func(c *ingest.Config) { c.DeadLetterBroken = false },
		tgsim.Post{FileName: "cut.7z", Data: whole[:len(whole)-30]})
	first, _, _ := strings.Cut(got, "\n")
	if !strings.HasPrefix(first, "⚠ broken archive: ") {
		t.Fatalf("caption of a broken archive mirrored anyway = %q, want a first line saying it is broken", got)
	}
	if ingest.TokenOf(got) == "" {
		t.Errorf("caption %q carries no token", got)
	}
}

func TestSendsAreSilentWhenTheSessionIs(t *testing.T) {
	t.Parallel()
	for _, silent := range []bool{true, false} {
		e := newEnv(t, "a")
		p, c, _ := e.pipelineWith("a", nil, func(s *tg.Session) ingest.Telegram { s.Silent = silent; return s })
		posted := e.world.Post(e.src["a"], 0, tgsim.Post{FileName: "s.7z", Data: sevenOf("a.txt", "hello")})
		mustHandle(t, p, e.view(c, posted), store.OutcomePackage)
		e.deliver()
		sends := e.world.Sends()
		if len(sends) == 0 {
			t.Fatal("nothing was sent")
		}
		for _, s := range sends {
			if s.Silent != silent {
				t.Errorf("session silent=%v: send to %d recorded silent=%v", silent, s.Chat, s.Silent)
			}
		}
	}
}

func sevenOf(name, body string) []byte {
	return archivetest.SevenZip([]archivetest.File{{Name: name, Data: []byte(body)}})
}
