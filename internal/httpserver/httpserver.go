package httpserver

import (
	"cmp"
	"net/http"
	"time"
)

// The bounds New applies when Limits leaves them zero.
const (
	// DefaultReadHeaderTimeout bounds the request line and headers.
	DefaultReadHeaderTimeout = 5 * time.Second
	// DefaultReadTimeout bounds the whole request, body included: the
	// bodies stashd accepts are forms of a few KiB.
	DefaultReadTimeout = 10 * time.Second
	// DefaultWriteTimeout bounds a request from the end of its headers to
	// the end of its answer; it must exceed the console's search bound
	// (10 s) and a /readyz check.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultIdleTimeout closes a keep-alive connection left idle.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultMaxHeaderBytes caps the request line and headers.
	DefaultMaxHeaderBytes = 64 << 10
)

// Limits are a server's bounds; a zero field takes its default above.
type Limits struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	MaxHeaderBytes    int
}

// New returns a server for h with every bound set; the caller sets
// ErrorLog or TLSConfig when it needs them, and starts it.
func New(h http.Handler, l Limits) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cmp.Or(l.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       cmp.Or(l.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      cmp.Or(l.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       cmp.Or(l.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    cmp.Or(l.MaxHeaderBytes, DefaultMaxHeaderBytes),
	}
}
