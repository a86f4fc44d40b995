package audit

import (
	"strings"
	"testing"

	"stashd/tg"
)

// A copy in a forum topic other than the one its route names is a route
// violation; copies where some publication of the package wants them are
// not.
func TestTopicViolations(t *testing.T) {
	t.Parallel()
	const same, fixed = tg.ChatID(-2001), tg.ChatID(-2002)
	dragons, cats := Hash{1}, Hash{2}
	truth := Truth{Routed: true,
		Packages: []Package{
			{Hash: dragons, Name: "dragons.7z", Parts: []Part{{File: "fd"}}, Destinations: []tg.ChatID{same, fixed},
				Topics: map[tg.ChatID]TopicWant{same: {Same: true, Name: "Dragons"}, fixed: {Thread: 5 << 20}}},
			{Hash: cats, Name: "cats.7z", Parts: []Part{{File: "fc"}}, Destinations: []tg.ChatID{same},
				Topics: map[tg.ChatID]TopicWant{same: {Same: true}}}, // from outside any topic: General
		},
		Destinations: []Destination{
			{Chat: same, Docs: []Doc{
				{File: "fd", Thread: 3 << 20, TopicName: "Dragons"}, // in place
				{File: "fc", Thread: 3 << 20, TopicName: "Dragons"}, // belongs in General
			}},
			{Chat: fixed, Docs: []Doc{{File: "fd"}}}, // belongs in topic 5<<20
		},
	}
	carries := map[string]partRef{"fd": {dragons, 0}, "fc": {cats, 0}}
	c := checker{t: truth}
	var rep Report
	c.topicViolations(&rep, carries)
	if rep.RouteViolations != 2 {
		t.Errorf("route violations %d, want 2: %v", rep.RouteViolations, rep.RouteViolationNames)
	}
	for _, want := range []string{"cats.7z part 0 in -2001: in topic 3145728", "dragons.7z part 0 in -2002: in topic 0"} {
		if !strings.Contains(strings.Join(rep.RouteViolationNames, "\n"), want) {
			t.Errorf("no violation %q in %v", want, rep.RouteViolationNames)
		}
	}
}
