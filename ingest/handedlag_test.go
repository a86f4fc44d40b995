package ingest_test

import (
	"testing"
	"time"

	"stashd/sim/tgsim"
)

// openChat starts the chat's difference and answers before it is in
// (MessagesManager::open_dialog): a delivery handed to an account whose
// session holds a part as it was before an edit must read the part again
// only once the difference is in, or the part is given up as replaced and
// the package never reaches the destination.
func TestHandedDeliveryRereadsAPartOnceTheDifferenceIsIn(t *testing.T) {
	t.Parallel()
	deliverHandedStalePart(t, newEnvWorld(t, tgsim.Config{Seed: 1, DifferenceDelay: 300 * time.Millisecond}, "a", "b"), nil)
}
