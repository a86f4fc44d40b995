package tdlib

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine they started is
// still running at the end. go-tdlib's receiver is the exception: go-tdlib
// starts one per process, for all clients, and never stops it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/zelenin/go-tdlib/client.(*tdlib).receiver"))
}
