package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// writeKeyPair writes a self-signed certificate and its key as PEM files.
func writeKeyPair(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stashd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// A remote console is served over HTTPS: this listener's (a certificate and
// key that load) or a proxy's; the proxy's address parses.
func TestConsoleHTTPS(t *testing.T) {
	t.Parallel()
	cert, key := writeKeyPair(t)
	const remote = "console_remote = true\nconsole_token = \"0123456789abcdefXYZ\"\n"
	for text, field := range map[string]string{
		remote:                                  "console_remote",
		"console_tls_cert = \"" + cert + "\"\n": "console_tls_cert",
		"console_tls_key = \"" + key + "\"\n":   "console_tls_key",
		"console_tls_cert = \"" + key + "\"\nconsole_tls_key = \"" + key + "\"\n":        "console_tls_cert",
		"console_trusted_proxy = \"10.0.0.5\"\n":                                         "console_trusted_proxy",
		"console_behind_proxy = true\nconsole_trusted_proxy = \"10.0.0.5, proxy.lan\"\n": "console_trusted_proxy",
	} {
		_, err := Load(write(t, text+good), noEnv, nil)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field {
			t.Errorf("%s: error %v, want one naming %s", text, err, field)
		}
	}
	c, err := Load(write(t, remote+"console_tls_cert = \""+cert+"\"\nconsole_tls_key = \""+key+"\"\n"+good), noEnv, nil)
	if err != nil || c.ConsoleTLSCert != cert || c.ConsoleTLSKey != key {
		t.Errorf("with a certificate: %v", err)
	}
	c, err = Load(write(t, remote+"console_behind_proxy = true\nconsole_trusted_proxy = \"10.0.0.5, 10.1.0.0/16\"\n"+good), noEnv, nil)
	if err != nil {
		t.Fatalf("behind a proxy: %v", err)
	}
	got, _ := c.TrustedProxies()
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32"), netip.MustParsePrefix("10.1.0.0/16")}
	if !slices.Equal(got, want) {
		t.Errorf("trusted proxies %v, want %v", got, want)
	}
	env := func(k string) string {
		return map[string]string{"STASHD_CONSOLE_BEHIND_PROXY": "true", "STASHD_CONSOLE_TRUSTED_PROXY": "::1"}[k]
	}
	if c, err := Load(write(t, good), env, nil); err != nil || !c.ConsoleBehindProxy || c.ConsoleTrustedProxy != "::1" {
		t.Errorf("from the environment: %+v, %v", c, err)
	}
}
