package demo

import "math"

// Per-chat send limit of a flooded destination (Options.ChatFlood): on the
// demo's time scale, well below the daemon's send rate, so sends there
// meet waits of a second, which TDLib sits out once per send (the demo's
// Config.FloodSitOut) and hands on as 429 "Too Many Requests: retry after
// 1" when the send is refused again, while the other destinations take
// every send.
const (
	chatFloodRate  = 1.5 // sends per second, per account
	chatFloodBurst = 2
)

// floodChats gives a share Options.ChatFlood of the destinations (rounded
// up: any share above zero floods at least one; chosen by the seed) a
// tight per-chat send limit (tgsim.World.LimitChatSends).
func (r *runner) floodChats() {
	dests := r.gen.Destinations()
	n := int(math.Ceil(r.o.ChatFlood * float64(len(dests))))
	if n == 0 {
		return
	}
	for _, i := range r.rng.Perm(len(dests))[:min(n, len(dests))] {
		r.world.LimitChatSends(dests[i], chatFloodRate, chatFloodBurst)
		r.flooded = append(r.flooded, dests[i])
	}
}
