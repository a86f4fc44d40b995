// Package audit checks stashd's promises against a simulated world's ground
// truth: every distinct package catalogued and delivered to every
// destination, none delivered twice, every fault explained. `stashd demo`
// audits its in-process world; `stashd chaos` audits a `stashd sim`
// process, which serves the same Truth as JSON. One Check serves both.
package audit

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"stashd/ingest"
	"stashd/route"

	"stashd/sim/tgsim"
	"stashd/tg"
)

// Hash is a package's SHA-256, written as hex in JSON.
type Hash [32]byte

// MarshalText writes h as 64 hex digits.
func (h Hash) MarshalText() ([]byte, error) { return []byte(hex.EncodeToString(h[:])), nil }

// UnmarshalText reads 64 hex digits.
func (h *Hash) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(h) {
		return fmt.Errorf("package hash: want %d hex digits, got %d", 2*len(h), len(b))
	}
	_, err := hex.Decode(h[:], b)
	return err
}

// Truth is what the world knows: what was published where, what each
// destination holds, and which faults it injected.
type Truth struct {
	// Packages lists every publication in order, duplicates, corrupt and
	// incomplete ones included.
	Packages []Package `json:"packages"`
	// Routed is set when routes decide where packages go: each
	// publication then names its destinations. Otherwise every package
	// belongs in every destination.
	Routed bool `json:"routed,omitempty"`
	// Destinations holds the documents in each destination channel.
	Destinations []Destination `json:"destinations"`
	// Lost lists the sources that lost access; Protected those whose
	// content cannot be re-sent.
	Lost      []tg.ChatID `json:"lost,omitempty"`
	Protected []tg.ChatID `json:"protected,omitempty"`
	// VanishedCaptions are the captions of sends the world deleted instead
	// of sending (updateDeleteMessages).
	VanishedCaptions []string `json:"vanished_captions,omitempty"`
	// Send outcomes the world imposed.
	FailedSends int `json:"failed_sends"`
	// ClosedTopics and DeletedTopics count the forum topics the world
	// closed and deleted.
	ClosedTopics  int `json:"closed_topics,omitempty"`
	DeletedTopics int `json:"deleted_topics,omitempty"`
	// ChatFloodedSends counts sends refused by a chat's send limit.
	ChatFloodedSends int `json:"chat_flooded_sends,omitempty"`
	// ChatWaitsSatOut counts the waits of a chat's send limit TDLib sat
	// out before the send landed or was refused.
	ChatWaitsSatOut  int `json:"chat_waits_sat_out,omitempty"`
	FloodWaitedSends int `json:"flood_waited_sends"`
	ResentSends      int `json:"resent_sends"`
	// DownloadFaults counts downloads the world stalled or failed.
	DownloadFaults int `json:"download_faults"`
	// Calls counts Telegram requests by method, over every account.
	Calls map[string]int `json:"calls,omitempty"`
	// SessionOverlaps counts the requests an older session of an account
	// made after a newer session of the same account had made one: two
	// instances running one account at once. OverlapExamples are the
	// first few.
	SessionOverlaps int                    `json:"session_overlaps"`
	OverlapExamples []tgsim.SessionOverlap `json:"session_overlap_examples,omitempty"`
	// FloodWaitBreaches counts the requests an account made inside a flood
	// wait the world had asked of it (tgsim.World.FloodWaitBreaches),
	// TDLib's own re-sends at a client's start included; BreachExamples
	// are the first few.
	FloodWaitBreaches int                     `json:"flood_wait_breaches"`
	BreachExamples    []tgsim.FloodWaitBreach `json:"flood_wait_breach_examples,omitempty"`
	// PostedFiles are the files posted from a directory, with the
	// manifest's expectation of each (demo --post-dir).
	PostedFiles []tgsim.PostedFile `json:"posted_files,omitempty"`
}

// Package is one publication: a single archive, a multipart set or an
// album.
type Package struct {
	Hash       Hash   `json:"hash"`
	Name       string `json:"name"`
	Parts      []Part `json:"parts"`
	Corrupt    bool   `json:"corrupt,omitempty"`
	Incomplete bool   `json:"incomplete,omitempty"`
	// Published is when the publication's last part was posted (the
	// world's message dates, whole seconds).
	Published time.Time `json:"published,omitzero"`
	// Repack marks a repack of an earlier package: the same files in
	// other bytes, to be linked, and not delivered again when the first
	// copy's CRCs were checked against its bytes.
	Repack bool `json:"repack,omitempty"`
	// RepackOf is the hash of the package it repacks.
	RepackOf Hash `json:"repack_of,omitempty"`
	// Destinations are where the routes send this publication (with
	// Truth.Routed).
	Destinations []tg.ChatID `json:"destinations,omitempty"`
	// Replaced marks a publication whose document a later edit replaced:
	// mirrored only if stashd fetched it before the edit, so not required;
	// its parts name the files the message carried before. Edit marks the
	// document the edit put in its place, required like any other.
	Replaced bool `json:"replaced,omitempty"`
	Edit     bool `json:"edit,omitempty"`
	// Topics holds, for the destinations among Destinations whose route
	// names a forum topic, the topic this publication belongs in.
	Topics map[tg.ChatID]TopicWant `json:"topics,omitempty"`
}

// TopicWant is the forum topic of a destination a publication belongs in:
// a fixed thread, or (Same) the topic named like its source topic (Name;
// "" for a publication from outside any topic: the General topic).
type TopicWant struct {
	Thread int64  `json:"thread,omitempty"`
	Same   bool   `json:"same,omitempty"`
	Name   string `json:"name,omitempty"`
}

// holds reports whether a copy in doc is where w wants it.
func (w TopicWant) holds(doc Doc) bool {
	if w.Same {
		if w.Name == "" {
			return doc.Thread == 0
		}
		return doc.Thread != 0 && doc.TopicName == w.Name
	}
	return doc.Thread == w.Thread
}

// Part is one source message of a package and the file it carries now
// (File is empty when the message no longer carries one).
type Part struct {
	Chat    tg.ChatID    `json:"chat"`
	Message tg.MessageID `json:"message"`
	File    string       `json:"file,omitempty"`
	Size    int64        `json:"size"`
}

// Key is the part's source message.
func (p Part) Key() tg.MessageKey { return tg.MessageKey{Chat: p.Chat, Message: p.Message} }

// Destination is a destination channel and its documents, in message
// order.
type Destination struct {
	Chat tg.ChatID `json:"chat"`
	Docs []Doc     `json:"docs"`
}

// Doc is one document in a destination: its message, the unique id of its
// file and the delivery token its caption carries ("" for none).
type Doc struct {
	Message tg.MessageID `json:"message"`
	File    string       `json:"file"`
	Token   string       `json:"token,omitempty"`
	// Thread and TopicName are the forum topic the document is in (0 and
	// "" for none, or a forum's General topic).
	Thread    int64  `json:"thread,omitempty"`
	TopicName string `json:"topic_name,omitempty"`
}

// FromWorld reads the Truth of a simulated world: the generator's
// publications, the files the sources' messages carry now, the
// destinations' documents, and the sources the caller's fault knobs made
// inaccessible (lost) or protected. routes, when not nil, decide each
// publication's destinations.
func FromWorld(w *tgsim.World, g *tgsim.Generator, lost, protected []tg.ChatID, routes *route.Table) Truth {
	msgs := map[tg.MessageKey]tg.Message{}
	for _, s := range g.Sources() {
		for _, m := range w.Messages(s.Chat) {
			msgs[m.Key()] = m
		}
	}
	t := Truth{Lost: lost, Protected: protected, Routed: routes.Routed(), PostedFiles: g.PostedFiles()}
	srcTopics := map[tg.ChatID]map[int64]string{} // topic names by source, read once
	for _, p := range g.Truth().Packages {
		pkg := Package{Hash: p.Hash, Name: p.Name, Corrupt: p.Corrupt, Incomplete: p.Incomplete, Repack: p.Repack,
			Replaced: p.Replaced, Edit: p.Edit}
		if p.Repack {
			pkg.RepackOf = g.Truth().Packages[p.RepackOf].Hash
		}
		for i, k := range p.Parts {
			part := Part{Chat: k.Chat, Message: k.Message}
			if m, ok := msgs[k]; ok && m.Document != nil {
				part.File, part.Size = m.Document.File.UniqueID, m.Document.File.Size
			}
			if p.Replaced && i < len(p.ReplacedFiles) {
				// The message carries the edit's file now; this
				// publication is the file it carried before.
				part.File, part.Size = p.ReplacedFiles[i], int64(len(w.FileData(p.ReplacedFiles[i])))
			}
			if m, ok := msgs[k]; ok && m.Date.After(pkg.Published) {
				pkg.Published = m.Date
			}
			pkg.Parts = append(pkg.Parts, part)
		}
		if t.Routed && len(p.Parts) > 0 {
			// As its source posted it: the first part's chat, topic and
			// name, and the parts' total size.
			in := route.Package{Chat: p.Parts[0].Chat, Name: p.Name}
			if m, ok := msgs[p.Parts[0]]; ok {
				in.Topic = m.TopicID()
			}
			for _, part := range pkg.Parts {
				in.Size += part.Size
			}
			pkg.Destinations = routes.Destinations(in)
			for _, d := range pkg.Destinations {
				topic := routes.Topic(in, d)
				if topic.IsZero() {
					continue
				}
				if pkg.Topics == nil {
					pkg.Topics = map[tg.ChatID]TopicWant{}
				}
				want := TopicWant{Thread: topic.Thread, Same: topic.Same}
				if topic.Same && in.Topic != 0 {
					if srcTopics[in.Chat] == nil {
						srcTopics[in.Chat] = w.Topics(in.Chat)
					}
					want.Name = srcTopics[in.Chat][in.Topic]
				}
				pkg.Topics[d] = want
			}
		}
		if !pkg.Corrupt && !pkg.Repack {
			// A set is complete when it extracts (complete.go), whatever
			// its names say.
			if parts, ok := setParts(w, msgs, p.Parts); ok {
				if whole, order, hash, err := setExtracts(context.Background(), parts); err == nil {
					pkg.Incomplete = !whole
					if whole {
						// The set is the copies that make it.
						chosen := make([]Part, len(order))
						for i, idx := range order {
							chosen[i] = pkg.Parts[idx]
						}
						pkg.Parts, pkg.Hash = chosen, hash
					}
				}
			}
		}
		t.Packages = append(t.Packages, pkg)
	}
	for _, d := range g.Destinations() {
		dest := Destination{Chat: d, Docs: []Doc{}}
		topics := w.Topics(d)
		for _, m := range w.Messages(d) {
			if m.Document != nil {
				dest.Docs = append(dest.Docs, Doc{Message: m.ID, File: m.Document.File.UniqueID, Token: ingest.TokenOf(m.Caption),
					Thread: m.TopicID(), TopicName: topics[m.TopicID()]})
			}
		}
		// Copies delivered into a topic a user deleted later were
		// delivered: they count, unless the package is there again.
		live := map[string]bool{}
		for _, doc := range dest.Docs {
			live[doc.File] = true
		}
		for name, msgs := range w.DeletedTopicMessages(d) {
			for _, m := range msgs {
				if m.Document != nil && !live[m.Document.File.UniqueID] {
					dest.Docs = append(dest.Docs, Doc{Message: m.ID, File: m.Document.File.UniqueID, Token: ingest.TokenOf(m.Caption),
						Thread: m.TopicID(), TopicName: name})
				}
			}
		}
		t.Destinations = append(t.Destinations, dest)
	}
	t.ClosedTopics, t.DeletedTopics = w.TopicEvents()
	stats := w.SendStats()
	t.FailedSends, t.FloodWaitedSends, t.ResentSends = stats.Failed, stats.FloodWaited, stats.Resent
	t.ChatFloodedSends, t.ChatWaitsSatOut = stats.ChatFlooded, stats.ChatWaitsSatOut
	t.VanishedCaptions = w.VanishedCaptions()
	t.DownloadFaults = w.DownloadFaults()
	t.Calls = w.TotalCalls()
	t.SessionOverlaps, t.OverlapExamples = w.SessionOverlaps()
	t.FloodWaitBreaches, t.BreachExamples = w.AllFloodWaitBreaches(maxOverlapNames)
	return t
}

// unique returns the distinct complete packages by hash: the first
// publication of each hash, incomplete sets, repacks and documents
// replaced by edits left out (corrupt ones are mirrored too).
func (t Truth) unique() map[Hash]Package {
	out := map[Hash]Package{}
	for _, p := range t.Packages {
		if p.Incomplete || p.Repack || p.Replaced {
			continue
		}
		if _, ok := out[p.Hash]; !ok {
			out[p.Hash] = p
		}
	}
	return out
}
