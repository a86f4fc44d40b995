package caption

import (
	"strings"
	"testing"
)

func TestDefaultLook(t *testing.T) {
	t.Parallel()
	tmpl, err := Parse("")
	if err != nil {
		t.Fatal(err)
	}
	if got := tmpl.Render(Fields{Name: "a.zip"}, "", "stashd:tok"); got != "a.zip\nstashd:tok" {
		t.Errorf("single file: %q", got)
	}
	if got := tmpl.Render(Fields{Name: "a.rar", Parts: "part 2/5"}, "", "stashd:tok"); got != "a.rar (part 2/5)\nstashd:tok" {
		t.Errorf("part of a set: %q", got)
	}
}

func TestParseRejectsUnknownPlaceholders(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"{nom}", "{name", "name}", "{}"} {
		if _, err := Parse(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q) = %v, want a one-line error", bad, err)
		}
	}
	if _, err := Parse("{name} {size} {source} {date} {parts} {link}"); err != nil {
		t.Errorf("every placeholder: %v", err)
	}
}

func TestWarningFirstTokenLast(t *testing.T) {
	t.Parallel()
	tmpl, _ := Parse("{name}")
	got := tmpl.Render(Fields{Name: "x.7z"}, "⚠ broken archive: unexpected EOF", "stashd:tok")
	if got != "⚠ broken archive: unexpected EOF\nx.7z\nstashd:tok" {
		t.Errorf("got %q", got)
	}
}

func TestCutKeepsTokenWithinLimit(t *testing.T) {
	t.Parallel()
	tmpl, _ := Parse(strings.Repeat("😀", 600) + "{name}")
	got := tmpl.Render(Fields{Name: "x.7z"}, "", "stashd:0123456789abcdef")
	if Units(got) > Limit {
		t.Fatalf("%d units, over %d", Units(got), Limit)
	}
	if !strings.HasSuffix(got, "…\nstashd:0123456789abcdef") {
		t.Errorf("tail %q: want the cut text, an ellipsis, then the token line", got[len(got)-40:])
	}
}

func TestHumanSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{512: "512 B", 2048: "2.0 KiB", 12_897_485: "12.3 MiB", 5 << 30: "5.0 GiB"} {
		if got := HumanSize(n); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", n, got, want)
		}
	}
}
