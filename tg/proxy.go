package tg

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// ProxyType is the kind of proxy TDLib connects through.
type ProxyType string

// Proxy types, as the proxy URL's scheme names them.
const (
	ProxySOCKS5  ProxyType = "socks5"
	ProxyHTTP    ProxyType = "http"
	ProxyMTProto ProxyType = "mtproto"
)

// Proxy is a proxy for an account's TDLib client (addProxy). Password and
// Secret are secrets: String leaves them out.
type Proxy struct {
	Type     ProxyType
	Server   string
	Port     int
	Username string
	Password string
	// Secret is an MTProto proxy's secret (hex or base64, as given).
	Secret string
}

// ParseProxy reads socks5://[user[:pass]@]host:port,
// http://[user[:pass]@]host:port or mtproto://secret@host:port. An error
// never repeats the password or the secret.
func ParseProxy(s string) (Proxy, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return Proxy{}, errors.New("not a proxy URL: use socks5://user:pass@host:port, http://host:port or mtproto://secret@host:port")
	}
	// An '@' past the authority means a '/', '?' or '#' in the user name,
	// password or secret ended it early: what url.Parse took for the host
	// and port, path or fragment is then a piece of the credentials, and
	// no part of the URL is shown.
	if _, rest, ok := strings.Cut(s, "://"); ok {
		if i := strings.IndexAny(rest, "/?#"); i >= 0 && strings.Contains(rest[i:], "@") {
			return Proxy{}, fmt.Errorf("proxy %s://…: not host:port after the @ (a '/', '?' or '#' in the user name, password or secret must be percent-encoded: %%2F, %%3F, %%23)", u.Scheme)
		}
	}
	host, portText, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return Proxy{}, fmt.Errorf("proxy %s://…: needs host:port", u.Scheme)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return Proxy{}, fmt.Errorf("proxy %s://…%s: port %q is not 1..65535", u.Scheme, host, portText)
	}
	p := Proxy{Type: ProxyType(strings.ToLower(u.Scheme)), Server: host, Port: port}
	switch p.Type {
	case ProxySOCKS5, ProxyHTTP:
		if u.User != nil {
			p.Username = u.User.Username()
			p.Password, _ = u.User.Password()
		}
	case ProxyMTProto:
		if u.User == nil || u.User.Username() == "" {
			return Proxy{}, fmt.Errorf("proxy mtproto://…@%s: needs the secret before the @", u.Host)
		}
		p.Secret = u.User.Username()
	default:
		return Proxy{}, fmt.Errorf("proxy type %q: use socks5, http or mtproto", u.Scheme)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" {
		return Proxy{}, fmt.Errorf("proxy %s: no path, query or fragment expected", p)
	}
	return p, nil
}

// String is the proxy's URL without its password or secret, for logs.
func (p Proxy) String() string {
	user := ""
	switch {
	case p.Secret != "":
		user = "***@"
	case p.Username != "" && p.Password != "":
		user = p.Username + ":***@"
	case p.Username != "":
		user = p.Username + "@"
	}
	return fmt.Sprintf("%s://%s%s", p.Type, user, net.JoinHostPort(p.Server, strconv.Itoa(p.Port)))
}
