package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"stashd/harness/demo"
)

// screen is a minimal terminal: it wraps at width, and understands \r,
// \n and "erase to end of line".
type screen struct {
	width int
	rows  []string
	col   int
}

func (s *screen) Write(p []byte) (int, error) {
	in := string(p)
	if len(s.rows) == 0 {
		s.rows = []string{""}
	}
	for len(in) > 0 {
		last := len(s.rows) - 1
		switch {
		case strings.HasPrefix(in, "\033[K"):
			s.rows[last] = s.rows[last][:s.col]
			in = in[3:]
			continue
		case in[0] == '\r':
			s.col = 0
		case in[0] == '\n':
			s.rows = append(s.rows, "")
			s.col = 0
		default:
			if s.col == s.width {
				s.rows = append(s.rows, "")
				s.col, last = 0, last+1
			}
			row := []byte(s.rows[last])
			for len(row) < s.col {
				row = append(row, ' ')
			}
			if s.col < len(row) {
				row[s.col] = in[0]
			} else {
				row = append(row, in[0])
			}
			s.rows[last] = string(row)
			s.col++
		}
		in = in[1:]
	}
	return len(p), nil
}

// On an 80-column terminal the progress line stays one line, and log lines
// print above it, whole, with the progress line drawn again below them.
func TestLiveLineStaysOneLineUnderLogs(t *testing.T) {
	scr := &screen{width: 80}
	l := &liveLine{out: scr, width: func() int { return 80 }}
	log := slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	p := demo.Progress{Elapsed: 12 * time.Second, Published: 240, PublishedFor: 12 * time.Second, Publishing: true,
		Catalogued: 180, Queue: 3, Lag: 7, Dirty: 1, Duplicates: 12, DeadLetter: 2, Restarts: 1}
	for i := range 3 {
		p.Published += i
		l.Set(progressLine(p))
		log.Warn("a source went dirty", "reason", "gap")
		l.Set(progressLine(p))
	}
	var logs, status int
	for i, row := range scr.rows {
		switch {
		case strings.Contains(row, "a source went dirty"):
			logs++
		case strings.Contains(row, "items"):
			status++
			if i != len(scr.rows)-1 {
				t.Errorf("a progress line left at row %d: %q", i, row)
			}
		case row != "":
			t.Errorf("stray half line at row %d: %q", i, row)
		}
	}
	if logs != 3 || status != 1 {
		t.Errorf("%d log lines and %d progress lines, want 3 and 1:\n%s", logs, status, strings.Join(scr.rows, "\n"))
	}
	l.Clear()
	if last := scr.rows[len(scr.rows)-1]; last != "" {
		t.Errorf("Clear left %q", last)
	}
}

// The rate is items over the time spent posting: it stops falling once
// posting has ended.
func TestProgressRateStopsFallingAfterPosting(t *testing.T) {
	p := demo.Progress{Elapsed: 40 * time.Second, Published: 200, PublishedFor: 10 * time.Second}
	line := progressLine(p)
	if !strings.Contains(line, "items 200 (20.0/s)") || !strings.Contains(line, "settling") {
		t.Errorf("progress line %q: want 20.0/s while settling", line)
	}
	for _, word := range []string{"catalogued", "dead letters", "dup posts"} {
		if !strings.Contains(line, word) {
			t.Errorf("progress line %q lacks %q", line, word)
		}
	}
}

func TestFitCutsAtAField(t *testing.T) {
	if got := fit("aaaa  bbbb  cccc", 13); got != "aaaa  bbbb" {
		t.Errorf("fit = %q", got)
	}
	if got := fit("short", 80); got != "short" {
		t.Errorf("fit = %q", got)
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// Warnings are counted by kind and summarised; errors pass at once.
func TestWarnSummary(t *testing.T) {
	var passed strings.Builder
	h := newWarnSummary(slog.NewTextHandler(&passed, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	log := slog.New(h).With("component", "ingest")
	log.Info("not shown")
	log.Warn("set is a dead letter", "source", -1001, "reason", "part 4 missing")
	log.Warn("set is a dead letter", "source", -1002, "reason", "final .zip missing")
	log.Warn("download stalled", "file", 7)
	log.Error("cannot record", "err", "db down")
	if p := passed.String(); strings.Contains(p, "dead letter") || !strings.Contains(p, "cannot record") {
		t.Errorf("streamed: %q", p)
	}
	var out strings.Builder
	h.print(&out)
	want := "warnings: 3, by kind (run with -v to see each as it happens):\n" +
		"  2× set is a dead letter — first: component=ingest source=-1001 reason=part 4 missing\n" +
		"  1× download stalled — first: component=ingest file=7\n"
	if out.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", out.String(), want)
	}
}
