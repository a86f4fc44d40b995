package tgsim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strings"
)

// docRef is a message's document: which file, under which name.
type docRef struct {
	uid  string
	name string
	mime string
}

// file is an uploaded file, shared by every message that carries its
// unique id.
type file struct {
	uid  string
	name string
	mime string
	data []byte
}

// remoteRef resolves a remote id back to its account and file.
type remoteRef struct {
	account string
	uid     string
}

// mintUniqueID returns the n-th file unique id of this world: stable for a
// seed, shaped like Telegram's (base64url), and not a plain counter.
func (w *World) mintUniqueID(n int64) string {
	return "AgAD" + w.digest("unique", fmt.Sprint(n))[:16]
}

// remoteID returns account's remote id for a file. Telegram's remote ids
// differ between accounts, so one account cannot send with another's.
func (w *World) remoteID(account, uid string) string {
	id := "BQACAgIAAx0C" + w.digest("remote", account, uid)[:40]
	if _, ok := w.remotes[id]; !ok {
		w.remotes[id] = remoteRef{account: account, uid: uid}
	}
	return id
}

func (w *World) digest(parts ...string) string {
	h := sha256.New()
	var seed [8]byte
	binary.LittleEndian.PutUint64(seed[:], uint64(w.cfg.Seed))
	h.Write(seed[:])
	h.Write([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// canSee reports whether account can see a message carrying file uid: one
// that is live in an accessible chat the account is a member of.
func (w *World) canSee(a *account, uid string) bool {
	for id := range a.member {
		if c := w.chats[id]; !c.private && c.fileRefs[uid] > 0 {
			return true
		}
	}
	// Anyone can see what a public channel carries, member or not.
	for _, c := range w.chats {
		if c.username != "" && !c.private && !c.lostAccess && c.fileRefs[uid] > 0 {
			return true
		}
	}
	return false
}

// onlyProtected reports whether every chat through which a sees uid has
// protected content: TDLib then refuses to re-send the file.
func (w *World) onlyProtected(a *account, uid string) bool {
	for id := range a.member {
		if c := w.chats[id]; !c.private && c.fileRefs[uid] > 0 && !c.protected {
			return false
		}
	}
	for _, c := range w.chats {
		if c.username != "" && !c.private && !c.lostAccess && c.fileRefs[uid] > 0 && !c.protected {
			return false
		}
	}
	return true
}

// mimeType is a fixed table rather than mime.TypeByExtension, whose answers
// depend on the host's /etc/mime.types.
func mimeType(name string) string {
	lower := strings.ToLower(name)
	for _, e := range []struct{ suffix, mime string }{
		{".zip", "application/zip"},
		{".rar", "application/vnd.rar"},
		{".7z", "application/x-7z-compressed"},
		{".tar.gz", "application/gzip"},
		{".tgz", "application/gzip"},
		{".gz", "application/gzip"},
		{".tar", "application/x-tar"},
		{".pdf", "application/pdf"},
		{".jpg", "image/jpeg"},
		{".jpeg", "image/jpeg"},
		{".png", "image/png"},
		{".txt", "text/plain"},
	} {
		if strings.HasSuffix(lower, e.suffix) {
			return e.mime
		}
	}
	return "application/octet-stream"
}
