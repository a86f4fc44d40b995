package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"stashd/internal/config"
	"stashd/internal/pgtest"
	"stashd/store"
)

// nonLoopbackIP returns an address of this machine beyond loopback, or
// skips the test.
func nonLoopbackIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			return n.IP
		}
	}
	t.Skip("no address beyond loopback to reach the listener from")
	return nil
}

// startHTTP runs serve's listener on cfg (no daemon: /readyz is not asked).
func startHTTP(t *testing.T, cfg config.Config) string {
	t.Helper()
	st, err := store.Open(t.Context(), store.Config{URL: pgtest.New(t), MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	s := &server{cfg: cfg, log: slog.New(slog.DiscardHandler), st: st}
	t.Cleanup(func() {
		if s.closeConsole != nil {
			s.closeConsole()
		}
	})
	if err := s.serveHTTP(nil, prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.http.Close() })
	_, port, _ := net.SplitHostPort(s.metricsAddr)
	return port
}

func status(t *testing.T, c *http.Client, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// metrics_addr bound beyond loopback: /metrics, /healthz and /readyz answer
// loopback clients as before, and others only with the console token.
func TestMetricsNeedTokenBeyondLoopback(t *testing.T) {
	t.Parallel()
	ip := nonLoopbackIP(t)
	const token = "0123456789abcdefXYZ"
	for _, tok := range []string{"", token} {
		port := startHTTP(t, config.Config{MetricsAddr: "0.0.0.0:0", ConsoleToken: tok})
		c := http.DefaultClient
		remote := "http://" + net.JoinHostPort(ip.String(), port)
		for _, path := range []string{"/metrics", "/healthz", "/readyz"} {
			if code := status(t, c, remote+path, ""); code != http.StatusForbidden && code != http.StatusUnauthorized {
				t.Errorf("token %q: %s from %s without a token: status %d, want 401 or 403", tok, path, ip, code)
			}
		}
		want := http.StatusOK
		if tok == "" {
			want = http.StatusForbidden
		}
		if code := status(t, c, remote+"/metrics", token); code != want {
			t.Errorf("token %q: /metrics from %s with Bearer: status %d, want %d", tok, ip, code, want)
		}
		if code := status(t, c, "http://127.0.0.1:"+port+"/healthz", ""); code != http.StatusOK {
			t.Errorf("token %q: /healthz from loopback: status %d, want 200", tok, code)
		}
	}
}

// With console_tls_cert and console_tls_key the listener speaks HTTPS.
func TestListenerServesTLS(t *testing.T) {
	t.Parallel()
	cert, key := keyPair(t)
	port := startHTTP(t, config.Config{MetricsAddr: "127.0.0.1:0", ConsoleToken: "0123456789abcdefXYZ",
		ConsoleRemote: true, ConsoleTLSCert: cert, ConsoleTLSKey: key})
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if code := status(t, c, "https://127.0.0.1:"+port+"/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz over HTTPS: status %d", code)
	}
	// Go's TLS server answers plain HTTP with a 400.
	if code := status(t, http.DefaultClient, "http://127.0.0.1:"+port+"/healthz", ""); code == http.StatusOK {
		t.Error("/healthz over plain HTTP: 200, want HTTPS only")
	}
}

func keyPair(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "stashd"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(k)
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return cert, key
}
