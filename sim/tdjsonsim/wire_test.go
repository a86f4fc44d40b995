package tdjsonsim_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"stashd/internal/tdschema"
	"stashd/sim/tdjsonsim"
	"stashd/sim/tgsim"
)

// wire speaks the stand-in library's side of the protocol, in Go, so the
// server can be tested without cgo: one line per request with
// "@client_id", one TDLib object per line back.
//
// It checks both directions against TDLib's schema, so that a server in
// another process (stashd sim) is held to it as the in-process ones are:
// what it sends when it sends it, what it reads as the reader takes it,
// each answer against the function it answers.
type wire struct {
	t      *testing.T
	conn   net.Conn
	lines  chan tdObject // closed at the end of the connection
	extra  int
	schema *tdschema.Schema

	mu    sync.Mutex
	calls map[string]string // request type by "@extra", until answered
	bad   []string          // what the server wrote against the schema
}

// tdObject is one decoded TDLib object; numbers stay json.Number.
type tdObject map[string]any

// lineTimeout bounds the wait for one line from the server: a server that
// answers nothing fails the test instead of hanging it.
const lineTimeout = 20 * time.Second

func dialWire(t *testing.T, path string) *wire {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := tdjsonsim.Schema()
	if err != nil {
		t.Fatal(err)
	}
	w := &wire{t: t, conn: c, lines: make(chan tdObject, 1024), schema: schema, calls: make(map[string]string)}
	go func() {
		defer close(w.lines)
		sc := bufio.NewScanner(c)
		sc.Buffer(make([]byte, 1<<16), 1<<24)
		for sc.Scan() {
			w.checkObject(sc.Bytes())
			d := json.NewDecoder(bytes.NewReader(sc.Bytes()))
			d.UseNumber()
			var o tdObject
			if err := d.Decode(&o); err != nil {
				o = tdObject{"@type": "undecodable", "line": sc.Text()}
			}
			w.lines <- o
		}
	}()
	t.Cleanup(func() {
		c.Close()
		for range w.lines {
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, v := range w.bad {
			t.Errorf("TDLib schema: the server wrote %s", v)
		}
	})
	return w
}

// checkObject checks one line the server wrote.
func (w *wire) checkObject(line []byte) {
	var head struct {
		Extra string `json:"@extra"`
	}
	_ = json.Unmarshal(line, &head)
	w.mu.Lock()
	fn := w.calls[head.Extra]
	delete(w.calls, head.Extra)
	w.mu.Unlock()
	var err error
	if fn != "" {
		err = w.schema.CheckAnswer(fn, line)
	} else {
		err = w.schema.CheckObject(line)
	}
	if err != nil {
		w.mu.Lock()
		w.bad = append(w.bad, fmt.Sprintf("%v\n\t%s", err, line))
		w.mu.Unlock()
	}
}

// send writes one request for client and returns its "@extra".
func (w *wire) send(client int, typ string, params map[string]any) string {
	w.t.Helper()
	return w.sendAs(client, typ, params, false)
}

// sendAs is send; malformed marks a request that violates TDLib's schema
// on purpose (and must).
func (w *wire) sendAs(client int, typ string, params map[string]any, malformed bool) string {
	w.t.Helper()
	w.extra++
	extra := fmt.Sprintf("req-%d", w.extra)
	if malformed {
		extra = tdjsonsim.MalformedExtra + extra
	}
	req := map[string]any{"@type": typ, "@extra": extra, "@client_id": client}
	for k, v := range params {
		req[k] = v
	}
	b, err := json.Marshal(req)
	if err != nil {
		w.t.Fatal(err)
	}
	switch err := w.schema.CheckRequest(b); {
	case err != nil && !malformed:
		w.t.Errorf("TDLib schema: request %s: %v", b, err)
	case err == nil && malformed:
		w.t.Errorf("request marked malformed is valid: %s", b)
	}
	w.mu.Lock()
	w.calls[extra] = typ
	w.mu.Unlock()
	if _, err := w.conn.Write(append(b, '\n')); err != nil {
		w.t.Fatal(err)
	}
	return extra
}

// next returns the next object the server wrote, or nil at the end of the
// connection.
func (w *wire) next() tdObject {
	w.t.Helper()
	select {
	case o, ok := <-w.lines:
		if !ok {
			return nil
		}
		return o
	case <-time.After(lineTimeout):
		w.t.Fatalf("nothing from the server for %s", lineTimeout)
		return nil
	}
}

// until reads up to and including the first object that match accepts,
// and returns it with the objects before it.
func (w *wire) until(what string, match func(tdObject) bool) (tdObject, []tdObject) {
	w.t.Helper()
	var before []tdObject
	for {
		o := w.next()
		if o == nil {
			w.t.Fatalf("connection ended while waiting for %s; got %v", what, before)
		}
		if match(o) {
			return o, before
		}
		before = append(before, o)
	}
}

// call sends a request and returns its answer and the objects that came
// before it.
func (w *wire) call(client int, typ string, params map[string]any) (tdObject, []tdObject) {
	w.t.Helper()
	extra := w.send(client, typ, params)
	return w.until(typ+" answer", func(o tdObject) bool { return o["@extra"] == extra })
}

// ok calls and fails the test unless the answer is of type want.
func (w *wire) ok(client int, typ string, params map[string]any, want string) tdObject {
	w.t.Helper()
	res, _ := w.call(client, typ, params)
	if res.typ() != want {
		w.t.Fatalf("%s: got %v, want a %s", typ, res, want)
	}
	return res
}

// malformed sends a request that violates TDLib's schema on purpose and
// returns its answer, which must be an error.
func (w *wire) malformed(client int, typ string, params map[string]any) tdObject {
	w.t.Helper()
	extra := w.sendAs(client, typ, params, true)
	res, _ := w.until(typ+" answer", func(o tdObject) bool { return o["@extra"] == extra })
	if want := "error"; res.typ() != want {
		w.t.Fatalf("%s: got %v, want a %s", typ, res, want)
	}
	return res
}

// update waits for an update of type typ for client.
func (w *wire) update(client int, typ string) tdObject {
	w.t.Helper()
	o, _ := w.until(typ, func(o tdObject) bool { return o.typ() == typ && o.int("@client_id") == int64(client) })
	return o
}

// login starts client as account and waits until it is ready.
func (w *wire) login(client int, dir, account string) {
	w.t.Helper()
	w.ok(client, "setTdlibParameters", tdlibParameters(dir, account), "ok")
	w.update(client, "updateAuthorizationState")
}

// readyWire serves w, and returns a connection to it whose client 1 is
// acct1, logged in on w.dir with its chats loaded.
func readyWire(t *testing.T, w *world) *wire {
	t.Helper()
	_, path := startServer(t, w.World)
	c := dialWire(t, path)
	c.login(1, w.dir, "acct1")
	c.ok(1, "loadChats", map[string]any{"chat_list": nil, "limit": 100}, "ok")
	return c
}

// tdlibParameters are setTdlibParameters as tg/tdlib sends them for an
// account whose state directory is dir/account.
func tdlibParameters(dir, account string) map[string]any {
	return map[string]any{
		"database_directory":   filepath.Join(dir, account, "database"),
		"files_directory":      filepath.Join(dir, account, "files"),
		"use_message_database": true, "use_file_database": true, "use_chat_info_database": true,
		"api_id": 94575, "api_hash": "test", "system_language_code": "en",
		"device_model": "stashd", "system_version": "linux", "application_version": "test",
	}
}

func (o tdObject) typ() string { s, _ := o["@type"].(string); return s }

// get follows a path of member names.
func (o tdObject) get(path ...string) any {
	var v any = map[string]any(o)
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			if om, isObj := v.(tdObject); isObj {
				m = om
			} else {
				return nil
			}
		}
		v = m[k]
	}
	return v
}

func (o tdObject) str(path ...string) string { s, _ := o.get(path...).(string); return s }

func (o tdObject) int(path ...string) int64 {
	switch v := o.get(path...).(type) {
	case json.Number:
		n, _ := v.Int64()
		return n
	case string: // TDLib's int64 fields
		var n int64
		fmt.Sscan(v, &n)
		return n
	}
	return 0
}

func (o tdObject) obj(path ...string) tdObject {
	m, _ := o.get(path...).(map[string]any)
	return tdObject(m)
}

// startServer serves world on a fresh socket until the test ends and
// returns the socket's path.
func startServer(t *testing.T, world *tgsim.World) (*tdjsonsim.Server, string) {
	t.Helper()
	return startServerConfig(t, world, tdjsonsim.Config{})
}

func startServerConfig(t *testing.T, world *tgsim.World, cfg tdjsonsim.Config) (*tdjsonsim.Server, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tdjson.sock")
	ln, err := tdjsonsim.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	srv := tdjsonsim.New(world, cfg)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
		for _, v := range tdjsonsim.WireViolations(srv) {
			t.Errorf("TDLib schema: %s", v)
		}
	})
	return srv, path
}
