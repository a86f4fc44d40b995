package tgsim

import (
	"context"

	"stashd/tg"
)

// MethodAddProxy is TDLib's addProxy, counted like the port's requests.
const MethodAddProxy = "addProxy"

// RequireProxy makes Telegram unreachable for account except through a
// proxy on server (a network that blocks Telegram): its clients report
// connecting, and stay so, until they add and enable a proxy on that
// server (AddProxy); then they report connectingToProxy and ready.
// Requests are still served, as for Disconnect. An empty server lifts the
// block for clients started afterwards.
func (w *World) RequireProxy(account, server string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.mustAccount(account).proxyOnly = server
}

// AddProxy adds and enables a proxy for the client (addProxy with enable
// true). Through the server RequireProxy names, a blocked client reaches
// Telegram; through another it stays connecting to the proxy.
func (c *Client) AddProxy(ctx context.Context, p tg.Proxy) error {
	return call0(ctx, c, MethodAddProxy, func() error {
		if p.Server == "" || p.Port <= 0 {
			return errBadRequest("Wrong proxy server or port")
		}
		c.proxy = &p
		a := c.w.accounts[c.account]
		c.enqueue(tg.ConnectionStateChanged{State: tg.ConnConnectingToProxy})
		if c.reachable(a) && !a.offline {
			c.enqueue(tg.ConnectionStateChanged{State: tg.ConnReady})
		}
		return nil
	})
}

// reachable reports whether the client can reach Telegram on account a's
// network, with w.mu held.
func (c *Client) reachable(a *account) bool {
	return a.proxyOnly == "" || c.proxy != nil && c.proxy.Server == a.proxyOnly
}
