//go:build !libtdjson

package tdlib

import (
	"context"
	"errors"
	"testing"

	"stashd/tg"
)

func TestWithoutTDLib(t *testing.T) {
	t.Parallel()
	c, err := New(context.Background(), Config{Account: "main"})
	if c != nil || !errors.Is(err, tg.ErrNoTDLib) {
		t.Errorf("New: got %v, %v; want tg.ErrNoTDLib", c, err)
	}
	if _, err := Version(); !errors.Is(err, tg.ErrNoTDLib) {
		t.Errorf("Version: %v", err)
	}
	var stub Client
	if _, ok := <-stub.Updates(); ok {
		t.Error("stub update stream is open")
	}
	if err := stub.LoadChats(context.Background()); !errors.Is(err, tg.ErrNoTDLib) {
		t.Errorf("LoadChats: %v", err)
	}
}
