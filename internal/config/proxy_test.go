package config

import (
	"flag"
	"strings"
	"testing"

	"stashd/tg"
)

// proxy: global or per account, from the file, STASHD_PROXY or --proxy; a
// bad one is one line naming the setting, never showing its secret.
func TestProxySetting(t *testing.T) {
	t.Parallel()
	body := "proxy = \"socks5://alice:pw1@10.0.0.1:1080\"\n" + good + "proxy = \"mtproto://ee00ff@mt.example:443\"\n" +
		"[[accounts]]\nname = \"second\"\nsources = [\"@other_chan\"]\n"
	c, err := Load(write(t, body), noEnv, nil)
	if err != nil {
		t.Fatal(err)
	}
	main, _ := c.ProxyOf(c.Accounts[0])
	second, _ := c.ProxyOf(c.Accounts[1])
	if main.Type != tg.ProxyMTProto || main.Secret != "ee00ff" || second.Type != tg.ProxySOCKS5 || second.Password != "pw1" {
		t.Errorf("account proxies: %+v, %+v", main, second)
	}

	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	RegisterFlags(fs)
	if err := fs.Parse([]string{"--proxy", "http://p.example:3128"}); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		if k == "STASHD_PROXY" {
			return "socks5://h:1"
		}
		return ""
	}
	c, err = Load(write(t, good), env, fs)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := c.ProxyOf(c.Accounts[0]); !ok || p.Type != tg.ProxyHTTP {
		t.Errorf("--proxy over STASHD_PROXY: %+v", p)
	}
	if _, ok := (&Config{}).ProxyOf(Account{}); ok {
		t.Error("no proxy configured, yet one returned")
	}

	for _, tc := range []struct{ body, field string }{
		{"proxy = \"socks5://bob:hunter2@host\"\n" + good, "proxy"},
		{good + "proxy = \"gopher://bob:hunter2@h:70\"\n", "accounts[0].proxy"},
	} {
		_, err := Load(write(t, tc.body), noEnv, nil)
		if err == nil {
			t.Fatalf("%q accepted", tc.body)
		}
		if msg := err.Error(); !strings.Contains(msg, tc.field) || strings.Contains(msg, "hunter2") || strings.Contains(msg, "\n") {
			t.Errorf("error %q: want one line naming %s without the password", msg, tc.field)
		}
	}
}
