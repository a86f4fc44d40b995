package tg

import "context"

// gateKey carries an account's request gate (PacedConfig.Gate) in the
// context Paced hands its client's methods.
type gateKey struct{}

// WithGate returns ctx carrying gate. Paced consults its gate before a
// method; a method that makes several requests (the TDLib adapter's
// LoadChats pages through two chat lists) asks Gated before each server
// request, so a lease lost while it runs stops it at its next request,
// not after its last.
func WithGate(ctx context.Context, gate func() error) context.Context {
	return context.WithValue(ctx, gateKey{}, gate)
}

// Gated returns the error of ctx's gate: nil when ctx carries none or the
// gate lets requests through.
func Gated(ctx context.Context) error {
	if gate, ok := ctx.Value(gateKey{}).(func() error); ok && gate != nil {
		return gate()
	}
	return nil
}
