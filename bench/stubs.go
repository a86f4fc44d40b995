package bench

import "context"

// MemoryResult is one memory probe.
type MemoryResult struct{}

func (r *runner) memory(ctx context.Context) error { return nil }

// RunMemory stub.
func RunMemory(ctx context.Context, o Options, backlog int) (MemoryResult, error) {
	return MemoryResult{}, nil
}
