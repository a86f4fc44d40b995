package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"stashd/store"
	"stashd/tg"
)

const (
	// floodFileName is the file in an account's directory under the data
	// directory that keeps the account's live flood waits.
	floodFileName = "flood_waits.json"
	// floodFileFormat marks a file written by floodFile; one without it
	// is foreign and ignored.
	floodFileFormat = "stashd flood waits 1"
	// floodFileMax bounds what is read of the file: it holds only live
	// waits, one per scope and chat, far less than this.
	floodFileMax = 1 << 20
	// floodFileLongest is the longest wait the file is trusted with: an
	// end further ahead is a damaged file (or clock) and is ignored, so
	// that no such file holds the account for good.
	floodFileLongest = 7 * 24 * time.Hour
)

// floodKey is what a flood wait holds: its scope, and the chat of a
// FloodWaitChat.
type floodKey struct {
	scope store.FloodWaitScope
	chat  tg.ChatID
}

// floodFile keeps one account's live flood waits in a small file in the
// account's directory (beside its TDLib state), beside their rows in
// flood_waits: a wait the database loses (restored from a dump, failed
// over to a replica that lagged, down or slow at the 429, or a stop
// before the background write of a chat's pause) is still honoured by
// the account's next run in this instance. The file is local: the table
// remains the way a wait reaches another instance taking the account
// over. Each wait that starts rewrites the file at once (temporary file,
// fsync, rename); it holds end times only, nothing secret. Its methods
// are safe on a nil *floodFile (no data directory: nothing is kept).
type floodFile struct {
	path    string
	account string
	log     *slog.Logger

	mu     sync.Mutex
	loaded bool
	until  map[floodKey]floodEnd // the waits known
}

// floodEnd is when a wait ends, by the wall clock, and how long it was
// when it was noted: a clock stepped back since cannot make it hold the
// account for longer than that.
type floodEnd struct {
	until time.Time
	wait  time.Duration
}

// floodFileJSON is the file's content.
type floodFileJSON struct {
	Format  string          `json:"format"`
	Account string          `json:"account"`
	Waits   []floodWaitJSON `json:"waits"`
}

type floodWaitJSON struct {
	Scope store.FloodWaitScope `json:"scope"`
	Chat  int64                `json:"chat,omitempty"`
	Until time.Time            `json:"until"` // UTC
	// Wait is how long the wait was when it was noted, in seconds: at
	// most this much of it is honoured after a restart. 0 (a file written
	// before it was kept) bounds the wait by floodFileLongest alone.
	Wait float64 `json:"wait_seconds,omitempty"`
}

// newFloodFile returns the flood-wait file of account under dataDir, or
// nil when dataDir is "".
func newFloodFile(dataDir, account string, log *slog.Logger) *floodFile {
	if dataDir == "" {
		return nil
	}
	path := filepath.Join(dataDir, "accounts", account, floodFileName)
	return &floodFile{path: path, account: account, log: log.With("account", account, "file", path)}
}

// waits returns the waits the file (read at the first call) and this
// process know that still run, with what is left of each.
func (f *floodFile) waits() []store.FloodWait {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loadLocked()
	now := time.Now()
	var out []store.FloodWait
	for k, e := range f.until {
		if left := e.until.Sub(now); left > 0 {
			out = append(out, store.FloodWait{Scope: k.scope, Chat: k.chat, Left: left})
		}
	}
	return out
}

// add notes waits (Left from now) and, if one ends later than what was
// known, rewrites the file before it returns. A failed write is logged:
// the database still has the wait, unless it failed too.
func (f *floodFile) add(waits ...store.FloodWait) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loadLocked()
	now, changed := time.Now(), false
	for _, w := range waits {
		k := floodKey{scope: w.Scope, chat: w.Chat}
		if w.Scope != store.FloodWaitChat {
			k.chat = 0
		}
		// A wait read back from the table ends a query's latency later
		// than the one it was written from: only an end later beyond
		// floodWaitSlack is news worth a write (and its fsync).
		if until := now.Add(w.Left); until.After(f.until[k].until.Add(floodWaitSlack)) {
			f.until[k] = floodEnd{until: until, wait: w.Left}
			changed = true
		}
	}
	if !changed {
		return
	}
	if err := f.writeLocked(now); err != nil {
		f.log.Warn("flood wait not written to the account's directory: if the database loses it too, a restart within it would not honour it", "err", err)
	}
}

// loadLocked reads the file once. A missing file is no wait; an
// unreadable, damaged or foreign one is logged and ignored (it is
// replaced at the next wait), never a reason not to start. f.mu held.
func (f *floodFile) loadLocked() {
	if f.loaded {
		return
	}
	f.loaded = true
	f.until = map[floodKey]floodEnd{}
	waits, err := readFloodFile(f.path, f.account)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		f.log.Warn("flood-wait file ignored: the account honours the waits the database recorded only", "err", err)
		return
	}
	now := time.Now()
	horizon := now.Add(floodFileLongest)
	for _, w := range waits {
		k := floodKey{scope: w.Scope, chat: tg.ChatID(w.Chat)}
		wait := time.Duration(w.Wait * float64(time.Second))
		if wait > 0 && w.Until.After(now.Add(wait)) {
			// The end was noted by a clock that was ahead (or the clock
			// was stepped back since): Telegram asked for wait, no more.
			f.log.Warn("flood-wait file: entry ending later than its wait allows (the clock went back); honoured for its wait",
				"scope", w.Scope, "chat", w.Chat, "until", w.Until, "wait", wait.String())
			w.Until = now.Add(wait)
		}
		switch {
		case !floodEntryValid(w):
			f.log.Warn("flood-wait file: entry not understood ignored", "scope", w.Scope, "chat", w.Chat)
		case w.Until.After(horizon):
			f.log.Warn("flood-wait file: entry ending implausibly late ignored", "scope", w.Scope, "chat", w.Chat, "until", w.Until)
		case w.Until.After(f.until[k].until):
			f.until[k] = floodEnd{until: w.Until, wait: wait}
		}
	}
}

// floodEntryValid reports whether w names a scope stashd records: a
// chat's with its chat, the others without one.
func floodEntryValid(w floodWaitJSON) bool {
	switch w.Scope {
	case store.FloodWaitAll, store.FloodWaitSends:
		return w.Chat == 0
	case store.FloodWaitChat:
		return w.Chat != 0
	}
	return false
}

// readFloodFile returns the waits the file at path holds for account.
func readFloodFile(path, account string) ([]floodWaitJSON, error) {
	// Non-blocking: a named pipe in the file's place answers the open at
	// once, instead of holding the account's start until someone writes.
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(fh, floodFileMax+1))
	if err != nil {
		return nil, err
	}
	if len(b) > floodFileMax {
		return nil, fmt.Errorf("larger than %d bytes", floodFileMax)
	}
	var c floodFileJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("damaged: %w", err)
	}
	if c.Format != floodFileFormat {
		return nil, fmt.Errorf("not a flood-wait file of stashd's (format %q)", c.Format)
	}
	if c.Account != account {
		return nil, fmt.Errorf("the flood waits of account %q, not of this one", c.Account)
	}
	return c.Waits, nil
}

// writeLocked drops the ended waits and replaces the file with the rest,
// durably: a temporary file is written and synced, then renamed over the
// file, and the directory synced. f.mu held.
func (f *floodFile) writeLocked(now time.Time) error {
	c := floodFileJSON{Format: floodFileFormat, Account: f.account, Waits: []floodWaitJSON{}}
	for k, e := range f.until {
		if !e.until.After(now) {
			delete(f.until, k)
			continue
		}
		c.Waits = append(c.Waits, floodWaitJSON{Scope: k.scope, Chat: int64(k.chat), Until: e.until.UTC(), Wait: e.wait.Seconds()})
	}
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	dir := filepath.Dir(f.path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := f.path + ".tmp"
	fh, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = fh.Write(b)
	err = errors.Join(err, fh.Chmod(0o600), fh.Sync(), fh.Close())
	if err == nil {
		err = os.Rename(tmp, f.path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}
