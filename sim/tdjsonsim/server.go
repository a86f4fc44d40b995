package tdjsonsim

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"stashd/sim/tgsim"
)

// SocketEnv names the environment variable that tells the stand-in
// libtdjson.so which Unix socket to connect to.
const SocketEnv = "STASHD_TDJSON_SOCKET"

// writeTimeout is how long a write to a connection may block. The stand-in
// library reads continuously into an unbounded buffer, as TDLib buffers, so
// a peer that reads nothing for this long is stopped or wedged: the
// connection is dropped rather than holding up the simulator.
const writeTimeout = time.Minute

// checkWire, when set, sees every request line a connection reads and
// every object line it writes, before anything else is done with them.
// The package's tests set it to check the wire against TDLib's schema; it
// is nil otherwise.
var checkWire func(c *conn, line []byte, request bool)

// ErrServerClosed is what Serve returns when called after Close.
var ErrServerClosed = errors.New("tdjsonsim: server closed")

// Config configures a Server.
type Config struct {
	// Logger receives the server's log lines; nil discards them.
	Logger *slog.Logger
	// LockWait is how long setTdlibParameters waits for a database
	// directory that another live instance holds before it fails, as
	// TDLib's binlog lock gives up after 100 tries 100 ms apart [10 s].
	LockWait time.Duration
}

// Server answers the stand-in libtdjson.so on behalf of the accounts of a
// tgsim.World. Create it with New; the zero value is not usable. Its
// methods are safe for concurrent use.
type Server struct {
	world *tgsim.World
	log   *slog.Logger
	seq   atomic.Int64 // connections accepted, for logs

	lockWait time.Duration

	mu     sync.Mutex
	lns    map[net.Listener]bool
	conns  map[*conn]bool
	closed bool
	wg     sync.WaitGroup // one per connection being served
	// dirs holds the database directories of the live instances: TDLib
	// locks its binlog, so two instances never share one. freed is closed
	// (and replaced) whenever one is released.
	dirs  map[string]*session
	freed chan struct{}
}

// New returns a Server for world. It serves nothing until Serve.
func New(world *tgsim.World, cfg Config) *Server {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		world:    world,
		log:      log.With("component", "tdjsonsim"),
		lns:      make(map[net.Listener]bool),
		conns:    make(map[*conn]bool),
		lockWait: cmp.Or(cfg.LockWait, 10*time.Second),
		dirs:     make(map[string]*session),
		freed:    make(chan struct{}),
	}
}

// lockDir takes dir for s, waiting up to the server's lock wait while
// another live instance holds it; false when it is still held then.
func (s *Server) lockDir(ctx context.Context, dir string, sess *session) bool {
	timer := time.NewTimer(s.lockWait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		holder, held := s.dirs[dir]
		if !held || holder == sess {
			s.dirs[dir] = sess
			s.mu.Unlock()
			return true
		}
		freed := s.freed
		s.mu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// unlockDir releases the directory sess holds, if any.
func (s *Server) unlockDir(sess *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for dir, holder := range s.dirs {
		if holder == sess {
			delete(s.dirs, dir)
			close(s.freed)
			s.freed = make(chan struct{})
		}
	}
}

// Listen listens on the Unix socket path. A socket file that nothing
// listens on any more (left by a process that died) is replaced; one that
// is in use is an error. The socket file is removed when the listener
// closes.
func Listen(path string) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == fs.ModeSocket {
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
			return nil, fmt.Errorf("listen on %s: another process is serving it", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("remove stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return ln, nil
}

// Serve accepts connections on ln and serves each until it ends or the
// Server closes. It returns nil once Close has been called, the accept
// error otherwise; either way ln is closed. Connections it accepted are
// still being served when it returns: Close waits for them.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		c := newConn(s, nc, s.seq.Add(1))
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			return nil
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			c.serve()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, closes every TDLib instance the way TDLib closes
// (authorizationStateClosing, the requests still running answered,
// authorizationStateClosed), closes their simulated clients and the
// connections, and waits for all of it. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	lns := make([]net.Listener, 0, len(s.lns))
	for ln := range s.lns {
		lns = append(lns, ln)
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(c.shutdown)
	}
	wg.Wait()
	s.wg.Wait()
	return nil
}

// conn is one process using the stand-in library.
type conn struct {
	s   *Server
	nc  net.Conn
	log *slog.Logger

	wmu  sync.Mutex
	werr error // the first failed write; later writes are dropped

	mu       sync.Mutex
	sessions map[int]*session // by TDLib client id
	ending   bool             // no new sessions: the connection is ending
	wg       sync.WaitGroup   // request handlers, forwarders, closers
}

func newConn(s *Server, nc net.Conn, seq int64) *conn {
	return &conn{s: s, nc: nc, log: s.log.With("conn", seq), sessions: make(map[int]*session)}
}

// maxLine bounds one request line. TDLib requests stashd makes are well
// under a kilobyte; a longer line is a broken peer.
const maxLine = 1 << 20

// serve reads requests until the connection ends, then ends its sessions:
// the TDLib instances of a process that went away go with it.
func (c *conn) serve() {
	c.log.Info("stand-in library connected")
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		line, err := readLine(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.log.Warn("read request", "err", err)
			}
			break
		}
		c.dispatch(line)
	}
	c.endSessions(false)
	c.nc.Close()
	c.wg.Wait()
	c.log.Info("stand-in library disconnected")
}

// readLine returns the next non-empty line, trimmed. A last line without
// its newline is incomplete (the writer died mid-line) and is dropped.
func readLine(r *bufio.Reader) ([]byte, error) {
	for {
		var line []byte
		for {
			chunk, err := r.ReadSlice('\n')
			line = append(line, chunk...)
			if len(line) > maxLine {
				return nil, fmt.Errorf("request line longer than %d bytes", maxLine)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				return nil, err
			}
			break
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			return line, nil
		}
	}
}

// request is one td_send as the stand-in library relays it.
type request struct {
	Type     string          `json:"@type"`
	Extra    json.RawMessage `json:"@extra"`
	ClientID int             `json:"@client_id"`
	raw      []byte
}

// dispatch hands one request line to its session, creating the session on
// a client's first request.
func (c *conn) dispatch(line []byte) {
	if checkWire != nil {
		checkWire(c, line, true)
	}
	r := &request{raw: line}
	if err := json.Unmarshal(line, r); err != nil || r.ClientID <= 0 || r.Type == "" {
		// Without a client id there is no one to answer.
		c.log.Warn("drop malformed request", "err", err, "client", r.ClientID, "type", r.Type)
		return
	}
	c.mu.Lock()
	if c.ending {
		c.mu.Unlock()
		return
	}
	s := c.sessions[r.ClientID]
	if s == nil {
		s = newSession(c, r.ClientID)
		c.sessions[r.ClientID] = s
		c.mu.Unlock()
		// A new instance reports TDLib's version and its first state
		// before it answers anything, as TDLib does.
		for _, u := range startUpdates() {
			c.send(s.id, u)
		}
	} else {
		c.mu.Unlock()
	}
	s.request(r)
}

// goHandle runs fn on a goroutine that the connection waits for.
func (c *conn) goHandle(fn func()) { c.wg.Go(fn) }

// endSessions closes every session; notify says whether the peer is still
// there to be told.
func (c *conn) endSessions(notify bool) {
	c.mu.Lock()
	c.ending = true
	sessions := make([]*session, 0, len(c.sessions))
	for _, s := range c.sessions {
		sessions = append(sessions, s)
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() { s.terminate(nil, notify) })
	}
	wg.Wait()
}

// shutdown ends the connection from the server's side: every instance is
// closed as TDLib closes, then the connection.
func (c *conn) shutdown() {
	c.endSessions(true)
	c.nc.Close()
}

// reply answers r with obj, echoing its "@extra".
func (c *conn) reply(id int, r *request, obj object) {
	if len(r.Extra) > 0 {
		obj = append(obj[:len(obj):len(obj)], member{"@extra", r.Extra})
	}
	c.send(id, obj)
}

// send writes obj for client id as one line.
func (c *conn) send(id int, obj object) {
	obj = append(obj[:len(obj):len(obj)], member{"@client_id", id})
	b, err := obj.MarshalJSON()
	if err != nil {
		c.log.Error("encode TDLib object", "err", err)
		return
	}
	if checkWire != nil {
		checkWire(c, b, false)
	}
	b = append(b, '\n')
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.werr = err
		if !errors.Is(err, net.ErrClosed) {
			c.log.Warn("write to stand-in library; dropping the connection", "err", err)
		}
		// serve sees the closed connection and ends the sessions.
		c.nc.Close()
	}
}
