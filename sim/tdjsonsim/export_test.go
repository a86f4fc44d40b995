package tdjsonsim

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"stashd/internal/tdschema"
)

// Every Server of the package's tests checks its wire against TDLib's
// schema (td_api.tl of the go-tdlib module): each request it reads must be
// a function of the schema, each object it writes a constructor of it
// with every field TDLib writes, and each answer of the class its request
// returns. What is wrong is kept by server; a test reads it with
// WireViolations, and TestMain fails the run on any left.
func init() { checkWire = wireLog.check }

var wireLog = &wireChecker{
	calls: make(map[callKey]string),
	bad:   make(map[*Server][]string),
}

type wireChecker struct {
	once    sync.Once
	schema  *tdschema.Schema
	loadErr error

	mu    sync.Mutex
	calls map[callKey]string   // request type by connection, client and @extra
	bad   map[*Server][]string // violations by server
	all   []string
}

// MalformedExtra is the prefix of the "@extra" of a request a test sends
// malformed on purpose, to see it answered with TDLib's error: such a
// request must violate the schema, and is not reported for it.
const MalformedExtra = "malformed-"

// IsMalformed reports whether extra (raw JSON or not) marks a malformed
// request.
func IsMalformed[T string | json.RawMessage](extra T) bool {
	return strings.HasPrefix(strings.Trim(string(extra), `"`), MalformedExtra)
}

// callKey names a request until it is answered.
type callKey struct {
	c        *conn
	clientID int
	extra    string
}

// Schema is TDLib's schema, as the package's tests check the wire with it.
func Schema() (*tdschema.Schema, error) {
	wireLog.once.Do(func() { wireLog.schema, wireLog.loadErr = tdschema.Load() })
	return wireLog.schema, wireLog.loadErr
}

func (w *wireChecker) check(c *conn, line []byte, request bool) {
	s, err := Schema()
	if err != nil {
		w.report(c, fmt.Sprintf("load TDLib schema: %v", err))
		return
	}
	var head struct {
		Type     string          `json:"@type"`
		Extra    json.RawMessage `json:"@extra"`
		ClientID int             `json:"@client_id"`
	}
	_ = json.Unmarshal(line, &head)
	key := callKey{c, head.ClientID, string(head.Extra)}
	if request {
		err := s.CheckRequest(line)
		switch {
		case IsMalformed(head.Extra) && err == nil:
			w.report(c, fmt.Sprintf("request marked malformed is valid: %s", line))
		case !IsMalformed(head.Extra) && err != nil:
			w.report(c, fmt.Sprintf("request %s: %v\n\t%s", head.Type, err, line))
		}
		if len(head.Extra) > 0 {
			w.mu.Lock()
			w.calls[key] = head.Type
			w.mu.Unlock()
		}
		return
	}
	var fn string
	if len(head.Extra) > 0 {
		w.mu.Lock()
		fn = w.calls[key]
		delete(w.calls, key)
		w.mu.Unlock()
	}
	if fn != "" {
		err = s.CheckAnswer(fn, line)
	} else {
		err = s.CheckObject(line)
	}
	if err != nil {
		w.report(c, fmt.Sprintf("wrote %s: %v\n\t%s", head.Type, err, line))
	}
}

func (w *wireChecker) report(c *conn, v string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bad[c.s] = append(w.bad[c.s], v)
	w.all = append(w.all, v)
}

// WireViolations returns what srv read or wrote that TDLib's schema does
// not allow; with a nil srv, that of every server so far.
func WireViolations(srv *Server) []string {
	wireLog.mu.Lock()
	defer wireLog.mu.Unlock()
	if srv == nil {
		return append([]string(nil), wireLog.all...)
	}
	return append([]string(nil), wireLog.bad[srv]...)
}
