package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"stashd/harness/demo"
)

// liveLine is a status line kept at the bottom of a terminal. Log lines
// written through it go above the status line: it is cleared, the log
// line written, and the status line drawn again. The status line is cut to
// the terminal's width so that it never wraps (a wrapped line cannot be
// cleared with \r and leaves half-lines behind).
type liveLine struct {
	mu    sync.Mutex
	out   io.Writer
	width func() int // terminal columns; 0 or less: 80
	line  string     // as drawn, already cut
}

const clearLine = "\r\033[K"

// Write writes log output above the status line.
func (l *liveLine) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.line == "" {
		return l.out.Write(p)
	}
	if _, err := io.WriteString(l.out, clearLine); err != nil {
		return 0, err
	}
	n, err := l.out.Write(p)
	if err != nil {
		return n, err
	}
	if len(p) > 0 && p[len(p)-1] != '\n' {
		_, _ = io.WriteString(l.out, "\n")
	}
	_, err = io.WriteString(l.out, l.line)
	return n, err
}

// Set draws s as the status line, cut to the terminal's width.
func (l *liveLine) Set(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.line = fit(s, l.cols()-1) // the last column would wrap on some terminals
	_, _ = io.WriteString(l.out, clearLine+l.line)
}

// Clear removes the status line, for what is printed after it.
func (l *liveLine) Clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.line != "" {
		_, _ = io.WriteString(l.out, clearLine)
		l.line = ""
	}
}

func (l *liveLine) cols() int {
	if l.width != nil {
		if w := l.width(); w > 0 {
			return w
		}
	}
	return 80
}

// fit cuts s to at most width characters, at a field boundary (two
// spaces) when one is near.
func fit(s string, width int) string {
	if width < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)[:width]
	cut := string(r)
	if i := strings.LastIndex(cut, "  "); i > 0 {
		cut = cut[:i]
	}
	return cut
}

// progressLine renders a demo progress snapshot. Its words are the
// audit's: items posted (the audit counts the archives among them),
// packages catalogued, dead letters, duplicate posts recognised (not
// deliveries: the audit's "delivered twice"); the most telling first, as a
// narrow terminal shows only the first fields. The rate is items over the time spent posting, so it stays put
// once posting ends.
func progressLine(p demo.Progress) string {
	rate := float64(p.Published) / max(p.PublishedFor.Seconds(), 0.001)
	phase := "posting"
	if !p.Publishing {
		phase = "settling"
	}
	fields := []string{
		fmt.Sprintf("%.0fs %s", p.Elapsed.Seconds(), phase),
		fmt.Sprintf("items %d (%.1f/s)", p.Published, rate),
		fmt.Sprintf("catalogued %d", p.Catalogued),
		fmt.Sprintf("dead letters %d", p.DeadLetter),
		fmt.Sprintf("dup posts %d", p.Duplicates),
		fmt.Sprintf("queue %d", p.Queue),
		fmt.Sprintf("lag %d", p.Lag),
		fmt.Sprintf("dirty %d", p.Dirty),
		fmt.Sprintf("restarts %d", p.Restarts),
	}
	return strings.Join(fields, "  ")
}
