package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"stashd/archive"
	"stashd/sim/tgsim"
	"stashd/tg"
)

// The generator records a multipart set as incomplete by its names
// (archive.OrderParts): a lone x.part1.rar that is a whole archive counts
// as incomplete, a set with a part posted twice as well. A user judges a
// set by whether it extracts, so the audit does too: the parts' bytes, as
// the sources hold them now, are assembled the way stashd's archive
// package assembles a set (names for the order, copies tried, the listing
// to its end), and a set that lists to its end is complete.

// setPart is one posted file of a set: its name and its bytes.
type setPart struct {
	name string
	data []byte
}

// setParts returns the parts of p as the sources hold them, and whether
// p is a multipart set by its names whose every part still carries a
// file (ok false: leave the generator's judgement).
func setParts(w *tgsim.World, msgs map[tg.MessageKey]tg.Message, keys []tg.MessageKey) (parts []setPart, ok bool) {
	multipart := false
	for _, k := range keys {
		m, found := msgs[k]
		if !found || m.Document == nil {
			return nil, false
		}
		if archive.ParseName(m.Document.FileName).IsMultipart() {
			multipart = true
		}
		parts = append(parts, setPart{name: m.Document.FileName, data: w.FileData(m.Document.File.UniqueID)})
	}
	return parts, multipart
}

// setExtracts reports whether parts make a whole archive and, when they
// do, the indices of the copies that make it in set order (a copy posted
// twice, or one that does not chain, is left out) and the set's hash over
// those copies' bytes. The parts are written to a scratch directory and
// assembled with archive.Assemble.
func setExtracts(ctx context.Context, parts []setPart) (whole bool, order []int, hash Hash, err error) {
	dir, err := os.MkdirTemp("", "stashd-audit-set-")
	if err != nil {
		return false, nil, hash, fmt.Errorf("judge a set: %w", err)
	}
	defer os.RemoveAll(dir)
	cands := make([]archive.Candidate, len(parts))
	for i, p := range parts {
		path := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(path, p.data, 0o600); err != nil {
			return false, nil, hash, fmt.Errorf("judge a set: %w", err)
		}
		sum := sha256.Sum256(p.data)
		cands[i] = archive.Candidate{Name: p.name, Path: path, Hash: hex.EncodeToString(sum[:]), Size: int64(len(p.data))}
	}
	a := archive.Assemble(ctx, cands, archive.Limits{})
	if !a.Complete {
		return false, nil, hash, nil
	}
	h := sha256.New()
	for _, i := range a.Order {
		h.Write(parts[i].data)
	}
	copy(hash[:], h.Sum(nil))
	return true, a.Order, hash, nil
}
