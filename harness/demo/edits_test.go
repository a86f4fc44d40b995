package demo_test

import (
	"testing"

	"stashd/harness/demo"
)

// Documents replaced by edits while the daemon runs, a restart among them:
// every replacement is mirrored, nothing twice.
func TestEditedDocumentsAreMirrored(t *testing.T) {
	t.Parallel()
	rep := run(t, demo.Options{Seed: 9, Steps: 150, Rate: 60, Sources: 3, Accounts: 2, EditDocuments: 0.15})
	check(t, 9, rep)
	if rep.EditedDocuments == 0 || rep.EditedDelivered != rep.EditedDocuments {
		t.Errorf("edited documents %d, delivered %d; want some, all delivered", rep.EditedDocuments, rep.EditedDelivered)
	}
	if rep.Missing != 0 || rep.DuplicateDeliveries != 0 {
		t.Errorf("missing %d, duplicate deliveries %d; want 0 and 0 (%v)", rep.Missing, rep.DuplicateDeliveries, rep.MissingNames)
	}
}
