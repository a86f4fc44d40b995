package store_test

import (
	"errors"
	"testing"

	"stashd/store"
	"stashd/tg"
)

// Following an upgrade marks the old source and creates the new one dirty
// at watermark 0 for the same account; the old watermark stays, a chat
// already watched keeps its state, and status shows the upgrade. Upgrades
// lists every account's upgraded groups.
func TestFollowUpgrade(t *testing.T) {
	t.Parallel()
	st := open(t)
	ctx := t.Context()
	const group, to, watched tg.ChatID = -4000000001, -1001000000002, -1001000000003
	for _, src := range []store.Source{
		{ChatID: group, Account: "a", Kind: tg.KindBasicGroup, Title: "small group"},
		{ChatID: watched, Account: "a", Kind: tg.KindSupergroup, Title: "already"},
	} {
		if err := st.EnsureSource(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.SaveSourceState(ctx, group, false, "", 40, 40); err != nil {
		t.Fatal(err)
	}
	src, err := st.FollowUpgrade(ctx, group, to, "upgraded")
	if err != nil {
		t.Fatal(err)
	}
	if src.ChatID != to || src.Account != "a" || src.Kind != tg.KindSupergroup || src.Title != "small group" ||
		src.Watermark != 0 || !src.Dirty || src.DirtyReason != "upgraded" {
		t.Errorf("new source %+v; want supergroup %d of account a, dirty at watermark 0", src, to)
	}
	old, err := st.GetSource(ctx, group)
	if err != nil || old.UpgradedTo != to || old.Watermark != 40 {
		t.Errorf("old source %+v, %v; want upgraded to %d with watermark 40", old, err, to)
	}
	if err := st.SaveSourceState(ctx, watched, false, "", 7, 7); err != nil {
		t.Fatal(err)
	}
	if src, err := st.FollowUpgrade(ctx, group, watched, "upgraded"); err != nil || src.Watermark != 7 || src.Title != "already" {
		t.Errorf("follow to a watched chat = %+v, %v; want its state kept", src, err)
	}
	if _, err := st.FollowUpgrade(ctx, -4000000009, to, "upgraded"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("follow of an unknown source: %v; want ErrNotFound", err)
	}
	if err := st.EnsureSource(ctx, store.Source{ChatID: -4000000004, Account: "b", Kind: tg.KindBasicGroup}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FollowUpgrade(ctx, -4000000004, -1001000000005, "upgraded"); err != nil {
		t.Fatal(err)
	}
	ups, err := st.Upgrades(ctx)
	if err != nil || len(ups) != 2 || ups[group] != watched || ups[-4000000004] != -1001000000005 {
		t.Errorf("upgrades = %v, %v; want both accounts' groups with their supergroups", ups, err)
	}
	rep, err := st.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range rep.Sources {
		if s.ChatID == int64(group) {
			found = s.UpgradedTo == int64(watched)
		}
	}
	if !found {
		t.Errorf("status sources %+v; want the group shown upgraded to %d", rep.Sources, watched)
	}
}
