package route

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Window is a daily delivery window: deliveries of a route wait outside
// it. Start and End are minutes after midnight in Loc; End before Start
// is a window that crosses midnight (22:00-06:00), and Start == End is
// the whole day.
type Window struct {
	Start, End int
	Loc        *time.Location
}

// ParseWindow reads "HH:MM-HH:MM" (or "H-H" hours) in the time zone zone
// (an IANA name such as "Europe/Berlin"; "" means UTC).
func ParseWindow(spec, zone string) (Window, error) {
	from, to, ok := strings.Cut(strings.ReplaceAll(spec, " ", ""), "-")
	if !ok {
		return Window{}, fmt.Errorf("%q is not a window: write it as HH:MM-HH:MM (e.g. 06:00-18:00)", spec)
	}
	start, err := clock(from)
	if err != nil {
		return Window{}, fmt.Errorf("window %q: %w", spec, err)
	}
	end, err := clock(to)
	if err != nil {
		return Window{}, fmt.Errorf("window %q: %w", spec, err)
	}
	loc := time.UTC
	if zone != "" {
		if loc, err = time.LoadLocation(zone); err != nil {
			return Window{}, fmt.Errorf("time zone %q: not an IANA time zone (e.g. Europe/Berlin)", zone)
		}
	}
	return Window{Start: start, End: end, Loc: loc}, nil
}

// clock reads "HH:MM" or "HH" (00:00..24:00) as minutes after midnight.
func clock(s string) (int, error) {
	hh, mm, hasMin := strings.Cut(s, ":")
	h, err := strconv.Atoi(hh)
	m := 0
	if err == nil && hasMin {
		m, err = strconv.Atoi(mm)
	}
	if err != nil || h < 0 || h > 24 || m < 0 || m > 59 || (h == 24 && m != 0) {
		return 0, fmt.Errorf("%q is not a time of day (HH:MM, 00:00..24:00)", s)
	}
	return h*60 + m, nil
}

// String shows the window as "06:00-18:00 Europe/Berlin".
func (w Window) String() string {
	return fmt.Sprintf("%02d:%02d-%02d:%02d %s", w.Start/60, w.Start%60, w.End/60, w.End%60, w.Loc)
}

// minuteOf returns the minutes after local midnight of t in w's zone.
func (w Window) minuteOf(t time.Time) int {
	l := t.In(w.Loc)
	return l.Hour()*60 + l.Minute()
}

// Open reports whether t is inside the window.
func (w Window) Open(t time.Time) bool {
	s, e := w.Start%1440, w.End%1440
	if s == e {
		return true
	}
	m := w.minuteOf(t)
	if s < e {
		return m >= s && m < e
	}
	return m >= s || m < e
}

// next returns the first time after t (or t itself) at minute-of-day
// minute in w's zone.
func (w Window) next(t time.Time, minute int) time.Time {
	l := t.In(w.Loc)
	day := time.Date(l.Year(), l.Month(), l.Day(), 0, 0, 0, 0, w.Loc)
	for d := 0; d < 3; d++ {
		at := time.Date(day.Year(), day.Month(), day.Day()+d, minute/60, minute%60, 0, 0, w.Loc)
		if !at.Before(t) {
			return at
		}
	}
	return t
}

// NextOpen returns when the window next opens: t when it is open.
func (w Window) NextOpen(t time.Time) time.Time {
	if w.Open(t) {
		return t
	}
	return w.next(t, w.Start%1440)
}

// NextClose returns when the window next closes after t; the zero time
// for a window open all day.
func (w Window) NextClose(t time.Time) time.Time {
	if w.Start%1440 == w.End%1440 {
		return time.Time{}
	}
	return w.next(t, w.End%1440)
}
