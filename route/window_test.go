package route_test

import (
	"testing"
	"time"

	"stashd/route"
	"stashd/tg"
)

func TestWindowOpenAndNext(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	day, err := route.ParseWindow("06:00-18:00", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	night, err := route.ParseWindow("22-6", "Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(h, m int) time.Time { return time.Date(2026, 6, 10, h, m, 0, 0, berlin) }
	cases := []struct {
		w        route.Window
		t        time.Time
		open     bool
		nextOpen time.Time
	}{
		{day, at(5, 59), false, at(6, 0)},
		{day, at(6, 0), true, at(6, 0)},
		{day, at(17, 59), true, at(17, 59)},
		{day, at(18, 0), false, at(30, 0)}, // tomorrow 06:00
		{night, at(23, 0), true, at(23, 0)},
		{night, at(3, 0), true, at(3, 0)},
		{night, at(6, 0), false, at(22, 0)},
		{night, at(12, 0), false, at(22, 0)},
	}
	for _, c := range cases {
		if got := c.w.Open(c.t); got != c.open {
			t.Errorf("%s Open(%s) = %v, want %v", c.w, c.t.Format("15:04"), got, c.open)
		}
		if got := c.w.NextOpen(c.t); !got.Equal(c.nextOpen) {
			t.Errorf("%s NextOpen(%s) = %s, want %s", c.w, c.t.Format("Jan 2 15:04"), got.In(berlin).Format("Jan 2 15:04"), c.nextOpen.Format("Jan 2 15:04"))
		}
	}
	// The zone counts: 05:30 UTC is 07:30 in Berlin in June.
	if !day.Open(time.Date(2026, 6, 10, 5, 30, 0, 0, time.UTC)) {
		t.Error("05:30 UTC is inside 06:00-18:00 Europe/Berlin in summer")
	}
	if got := day.NextClose(at(7, 0)); !got.Equal(at(18, 0)) {
		t.Errorf("NextClose(07:00) = %s, want 18:00", got)
	}
	for _, bad := range []string{"6-", "25:00-06:00", "06:61-07:00", "morning"} {
		if _, err := route.ParseWindow(bad, ""); err == nil {
			t.Errorf("ParseWindow(%q) accepted it", bad)
		}
	}
	if _, err := route.ParseWindow("06-18", "Mars/Olympus"); err == nil {
		t.Error("an unknown time zone was accepted")
	}
}

func TestGateOpensWithAnyRouteSendingThere(t *testing.T) {
	t.Parallel()
	day, _ := route.ParseWindow("06:00-18:00", "")
	night, _ := route.ParseWindow("20:00-22:00", "")
	const src, d1, d2 = tg.ChatID(-1), tg.ChatID(-2), tg.ChatID(-3)
	tbl := route.NewTable(nil, []route.Route{
		{Name: "day", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{d1, d2}, Window: &day},
		{Name: "night 7z", Sources: []route.Source{{Chat: src}}, Destinations: []tg.ChatID{d2}, Window: &night, Filter: route.Filter{Formats: []string{"7z"}}},
	})
	p7z := route.Package{Chat: src, Name: "a.7z"}
	ptar := route.Package{Chat: src, Name: "a.tar"}
	evening := time.Date(2026, 1, 1, 19, 0, 0, 0, time.UTC)
	if open, at, r := tbl.Gate(p7z, d2, evening); open || !at.Equal(time.Date(2026, 1, 1, 20, 0, 0, 0, time.UTC)) || r != "night 7z" {
		t.Errorf("Gate(7z, d2, 19:00) = %v, %s, %s; want closed until 20:00 by the night route", open, at, r)
	}
	if open, at, _ := tbl.Gate(ptar, d2, evening); open || !at.Equal(time.Date(2026, 1, 2, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("Gate(tar, d2, 19:00) = %v, %s; want closed until 06:00 tomorrow", open, at)
	}
	if open, _, _ := tbl.Gate(p7z, d2, evening.Add(90*time.Minute)); !open {
		t.Error("Gate(7z, d2, 20:30) closed; the night route is open")
	}
}
