package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
)

// warnSummary is the demo's log handler: warnings are counted by message
// and summarised at the end (the first of each kind with its attributes)
// instead of scrolling past the progress line; errors go to next at once.
type warnSummary struct {
	next  slog.Handler
	state *warnState
	attrs []slog.Attr
	group string
}

type warnState struct {
	mu     sync.Mutex
	order  []string
	counts map[string]int
	first  map[string]string
}

func newWarnSummary(next slog.Handler) *warnSummary {
	return &warnSummary{next: next, state: &warnState{counts: map[string]int{}, first: map[string]string{}}}
}

func (h *warnSummary) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h *warnSummary) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		return h.next.Handle(ctx, r)
	}
	s := h.state
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts[r.Message] == 0 {
		s.order = append(s.order, r.Message)
		var b strings.Builder
		add := func(a slog.Attr) bool {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			key := a.Key
			if h.group != "" {
				key = h.group + "." + key
			}
			fmt.Fprintf(&b, "%s=%v", key, a.Value)
			return true
		}
		for _, a := range h.attrs {
			add(a)
		}
		r.Attrs(add)
		s.first[r.Message] = b.String()
	}
	s.counts[r.Message]++
	return nil
}

func (h *warnSummary) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	c.next = h.next.WithAttrs(attrs)
	return &c
}

func (h *warnSummary) WithGroup(name string) slog.Handler {
	c := *h
	c.group = name
	c.next = h.next.WithGroup(name)
	return &c
}

// print writes the summary: how many warnings of each kind, with the
// first one's attributes; nothing when there were none.
func (h *warnSummary) print(w io.Writer) {
	s := h.state
	s.mu.Lock()
	defer s.mu.Unlock()
	total := 0
	for _, n := range s.counts {
		total += n
	}
	if total == 0 {
		return
	}
	fmt.Fprintf(w, "warnings: %d, by kind (run with -v to see each as it happens):\n", total)
	for _, msg := range s.order {
		fmt.Fprintf(w, "  %d× %s — first: %s\n", s.counts[msg], msg, s.first[msg])
	}
}
