package tg

import (
	"strings"
	"testing"
)

func TestParseProxy(t *testing.T) {
	for _, c := range []struct {
		in, shown string
		want      Proxy
	}{
		{"socks5://alice:s3cret@10.0.0.1:1080", "socks5://alice:***@10.0.0.1:1080",
			Proxy{Type: ProxySOCKS5, Server: "10.0.0.1", Port: 1080, Username: "alice", Password: "s3cret"}},
		{"http://proxy.example:3128", "http://proxy.example:3128", Proxy{Type: ProxyHTTP, Server: "proxy.example", Port: 3128}},
		{"mtproto://ee0123456789abcdef@[2001:db8::1]:443", "mtproto://***@[2001:db8::1]:443",
			Proxy{Type: ProxyMTProto, Server: "2001:db8::1", Port: 443, Secret: "ee0123456789abcdef"}},
	} {
		got, err := ParseProxy(c.in)
		if err != nil || got != c.want || got.String() != c.shown {
			t.Errorf("%s: %+v (%s), %v", c.in, got, got, err)
		}
	}
	for _, bad := range []string{"", "socks5://host", "ftp://h:1", "mtproto://h:443", "socks5://u:topsecret@h:99999", "http://u:topsecret@h:80/x"} {
		_, err := ParseProxy(bad)
		if err == nil {
			t.Errorf("%q: accepted", bad)
		} else if strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%q: the error shows the password: %v", bad, err)
		}
	}
}

// A '/', '?' or '#' left unencoded in the password ends the URL's
// authority early, so that url.Parse takes part of the password for the
// port, the path or the fragment: the error shows none of the URL past the
// scheme.
func TestParseProxyUnencodedPasswordNotShown(t *testing.T) {
	for _, bad := range []string{
		"socks5://alice:98765432/xyzsecret@10.0.0.1:1080",
		"socks5://alice:1234/xyzsecret@10.0.0.1:1080",
		"http://alice:98765432?xyzsecret@proxy.example:3128",
		"socks5://alice:98765432#xyzsecret@10.0.0.1:1080",
		"socks5://alice:zq9876#x@10.0.0.1:1080",
		"mtproto://ee98765432/xyzsecret@10.0.0.1:443",
	} {
		_, err := ParseProxy(bad)
		if err == nil {
			t.Errorf("%q: accepted", bad)
			continue
		}
		for _, piece := range []string{"9876", "5432", "1234", "xyzs", "zq98", "alice"} {
			if strings.Contains(bad, piece) && strings.Contains(err.Error(), piece) {
				t.Errorf("%q: the error shows %q: %v", bad, piece, err)
			}
		}
	}
	if _, err := ParseProxy("socks5://alice:98765432%2Fxyzsecret@10.0.0.1:1080"); err != nil {
		t.Errorf("percent-encoded '/': %v", err)
	}
}
