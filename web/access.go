package web

import (
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// maxForm caps a request body: the console's forms (login, retry, logout)
// are a few hundred bytes.
const maxForm = 4 << 10

// LoopbackHost reports whether a request's Host header names this
// machine's loopback (127.0.0.1 or any 127/8, [::1], localhost, the
// fully qualified localhost.), with or without a port, or is empty (an
// HTTP/1.0 request without Host, as health checkers send; a browser always
// names the host): what a loopback-only endpoint without a token checks
// against DNS rebinding, its only defence then: a page on attacker.example
// that rebinds its name to 127.0.0.1 reaches the listener, but its requests
// say Host: attacker.example.
func LoopbackHost(host string) bool {
	if host == "" {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// remoteIP is the address the connection comes from.
func remoteIP(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// fromProxy reports whether the request comes from a trusted proxy, whose
// X-Forwarded-For and X-Forwarded-Proto headers are then believed. No other
// client's are: anyone can send them.
func (c *Console) fromProxy(r *http.Request) bool {
	if !c.cfg.BehindProxy {
		return false
	}
	ip := remoteIP(r)
	for _, p := range c.cfg.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// clientIP is the client's address: the connection's, or, through a
// trusted proxy, the last address the proxy appended to X-Forwarded-For
// (earlier ones are the client's own word). A proxied request without the
// header counts as the proxy itself.
func (c *Console) clientIP(r *http.Request) netip.Addr {
	ip := remoteIP(r)
	if !c.fromProxy(r) {
		return ip
	}
	fwd := r.Header.Values("X-Forwarded-For")
	if len(fwd) == 0 {
		return ip
	}
	parts := strings.Split(fwd[len(fwd)-1], ",")
	a, err := netip.ParseAddr(strings.TrimSpace(parts[len(parts)-1]))
	if err != nil {
		return netip.Addr{} // unparsable: neither loopback nor anyone's
	}
	return a.Unmap()
}

func (c *Console) local(r *http.Request) bool { return c.clientIP(r).IsLoopback() }

// secure reports whether the client reached the console over HTTPS: this
// listener's TLS, or a trusted proxy that says so.
func (c *Console) secure(r *http.Request) bool {
	return r.TLS != nil || (c.fromProxy(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}

// gate applies the rules every console request passes before its body is
// read, login included; it answers the request itself when it refuses it.
func (c *Console) gate(w http.ResponseWriter, r *http.Request) bool {
	if c.cfg.Token == "" && !LoopbackHost(r.Host) {
		http.Error(w, "the console answers requests for 127.0.0.1, [::1] or localhost only", http.StatusMisdirectedRequest)
		return false
	}
	if !c.local(r) {
		if !c.cfg.AllowRemote {
			http.Error(w, "the console serves loopback clients only", http.StatusForbidden)
			return false
		}
		if !c.secure(r) {
			http.Error(w, "the console serves clients beyond loopback over HTTPS only", http.StatusForbidden)
			return false
		}
	}
	if r.ContentLength > maxForm {
		http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	return true
}

// allowed checks the token (bearer header or session cookie) of a request
// past the gate; it answers the request itself when it refuses it.
func (c *Console) allowed(w http.ResponseWriter, r *http.Request) bool {
	if c.cfg.Token == "" || c.bearer(r) || c.sessions.valid(sessionID(r)) {
		return true
	}
	if r.Method == http.MethodGet && r.Header.Get("Authorization") == "" {
		http.Redirect(w, r, Prefix+"login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="stashd console"`)
	http.Error(w, "a valid token is required", http.StatusUnauthorized)
	return false
}

func (c *Console) bearer(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && c.cfg.Token != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(c.cfg.Token)) == 1
}

// Protect guards the listener's other endpoints (/metrics, /healthz,
// /readyz): a request with "Authorization: Bearer TOKEN" is served; without
// it, a loopback client is served when it names the listener by a loopback
// Host (127.0.0.1, [::1], localhost) and refused with 421 otherwise, as the
// console refuses one (DNS rebinding: a page on attacker.example rebound to
// 127.0.0.1 says Host: attacker.example); any other client is refused.
func (c *Console) Protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.bearer(r) {
			h.ServeHTTP(w, r)
			return
		}
		if c.local(r) {
			if !LoopbackHost(r.Host) {
				http.Error(w, "served to requests for 127.0.0.1, [::1] or localhost only (or with the console token)", http.StatusMisdirectedRequest)
				return
			}
			h.ServeHTTP(w, r)
			return
		}
		if c.cfg.Token == "" {
			http.Error(w, "served to loopback clients only (set console_token to serve others)", http.StatusForbidden)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="stashd"`)
		http.Error(w, "a valid token is required", http.StatusUnauthorized)
	})
}
