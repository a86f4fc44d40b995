package demo_test

import (
	"testing"

	"stashd/harness/demo"
	"stashd/internal/config"
)

// Destination topics closed and deleted while stashd delivers into them,
// and a destination with a tight send limit, whose waits TDLib sits out
// or hands on as 429s: nothing is missing or delivered twice.
func TestTopicAndChatFloodFaults(t *testing.T) {
	t.Parallel()
	specs, err := config.LoadRoutes("../../deploy/demo-routes-topics.toml")
	if err != nil {
		t.Fatal(err)
	}
	rep := run(t, demo.Options{Seed: 7, Steps: 120, Rate: 20, Sources: 2, ForumTopics: 3, Accounts: 2,
		Destinations: 1, ForumDestination: true, Routes: specs, CloseTopics: 0.4, DeleteTopics: 0.4, ChatFlood: 0.5})
	check(t, 7, rep)
	t.Logf("closed %d, deleted %d topics; %d sends refused by a chat's limit, %d of its waits sat out", rep.ClosedTopics, rep.DeletedTopics, rep.ChatFloodedSends, rep.ChatWaitsSatOut)
	// Whether the flooded destination's waits are sat out by TDLib or
	// refused with 429s depends on how fast the daemon sends, which the
	// machine's load decides: the scenario guarantees only that the limit
	// met the sends. Each path alone is proved by the daemon's tests
	// (TestSendsTDLibSitsOutLandOnce, TestPendingSendIsNotResentInsideItsChatFloodWait,
	// TestChatFloodWaitOutlivesARestart).
	if rep.ClosedTopics == 0 || rep.DeletedTopics == 0 || rep.ChatFloodedSends+rep.ChatWaitsSatOut == 0 {
		t.Errorf("closed %d, deleted %d topics, %d sends refused by a chat's limit, %d of its waits sat out by TDLib; want topics closed and deleted and the limit met (%+v)",
			rep.ClosedTopics, rep.DeletedTopics, rep.ChatFloodedSends, rep.ChatWaitsSatOut, rep)
	}
	if rep.Missing != 0 || rep.DuplicateDeliveries != 0 || rep.RouteViolations != 0 {
		t.Errorf("missing %d (%v), twice %d, route violations %d (%v)", rep.Missing, rep.MissingNames,
			rep.DuplicateDeliveries, rep.RouteViolations, rep.RouteViolationNames)
	}
}
