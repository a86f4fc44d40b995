package archive

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Candidate is one posted file that may belong to a set.
type Candidate struct {
	// Name is the posted file name.
	Name string
	// Path is the local copy of the file.
	Path string
	// Hash tells apart copies posted under the same name (any digest of
	// the bytes, e.g. hex SHA-256); equal hashes are the same bytes.
	Hash string
	// Size is the file's size in bytes.
	Size int64
}

// Rejected is a candidate left out of an assembly, and why.
type Rejected struct {
	// Index is the candidate's index in the slice given to Assemble.
	Index int
	// Reason says why, in a few words ("same bytes as x.r00", "a copy of
	// x.r00 that does not chain: rar: truncated …").
	Reason string
}

// Assembly is Assemble's verdict on a candidate set.
type Assembly struct {
	// Complete is true when the chosen copies form the whole set, by name
	// and by content: the archive lists to its end, no volume missing.
	// A complete set may still carry Err (a damaged entry, an encrypted
	// header): it is whole but not verified.
	Complete bool
	// Verified is true when the chosen copies list without error.
	Verified bool
	// Order holds candidate indices in set order, the chosen copy of
	// each part; nil when the names do not make a set.
	Order []int
	// Format is the set's format (the listing's when the bytes say so).
	Format Format
	// Listing is the chosen copies' listing.
	Listing Listing
	// Err is the chosen copies' listing error, nil when Verified.
	Err error
	// Rejected are the candidates not in Order, with the reason.
	Rejected []Rejected
	// Missing names the missing volumes as they would be posted
	// ("x.r01", "x.zip.003"), at most 64 of them.
	Missing []string
	// Reason says why the set is not complete ("x.r01 missing"); "" when
	// Complete.
	Reason string
}

// maxCombinations bounds how many choices among same-named copies
// Assemble lists: each costs a listing.
const maxCombinations = 64

// Assemble picks, among candidates (the posted files of one set, in any
// order, copies of a part included), the copies that make the set valid:
// names give the parts' order, and where a part was posted more than once
// with different bytes the copies are tried (largest first) until the set
// lists to its end. Copies with the same bytes as a chosen one, and copies
// that did not make the set valid, are Rejected with the reason. A missing
// volume is named: by the gap in the names, or by the archive itself (a
// RAR end block saying another volume follows, a byte split whose
// concatenation stops before its end).
func Assemble(ctx context.Context, cands []Candidate, lim Limits) Assembly {
	return assemble(cands, func(f Format, order []int) (Listing, error) {
		paths := make([]string, len(order))
		for i, idx := range order {
			paths[i] = cands[idx].Path
		}
		return List(ctx, f, paths, lim)
	})
}

// lister lists the candidates at order as one archive of format f.
type lister func(f Format, order []int) (Listing, error)

func assemble(cands []Candidate, list lister) Assembly {
	var a Assembly
	if len(cands) == 0 {
		a.Reason = "no parts"
		return a
	}
	// Same bytes under the same name: one copy is enough.
	var slots []*assemblySlot
	byBase := map[string]*assemblySlot{}
	seen := map[string]int{} // base + hash → first candidate
	for i, c := range cands {
		n := ParseName(c.Name)
		key := n.Base + "\x00" + c.Hash
		if first, dup := seen[key]; dup && c.Hash != "" {
			a.Rejected = append(a.Rejected, Rejected{i, "same bytes as " + cands[first].Name})
			continue
		}
		seen[key] = i
		s := byBase[n.Base]
		if s == nil {
			s = &assemblySlot{base: n.Base}
			byBase[n.Base] = s
			slots = append(slots, s)
		}
		s.copies = append(s.copies, i)
	}
	for _, s := range slots {
		slices.SortStableFunc(s.copies, func(x, y int) int { return cmp.Compare(cands[y].Size, cands[x].Size) })
	}

	names := make([]Name, len(slots))
	for i, s := range slots {
		names[i] = ParseName(cands[s.copies[0]].Name)
	}
	o := OrderParts(names)
	if !o.Complete {
		a.Reason = o.Reason
		for _, p := range o.Missing {
			a.Missing = append(a.Missing, PartName(names, p))
		}
		if o.MissingFinal {
			a.Missing = append(a.Missing, o.Set)
		}
		if len(a.Missing) > 0 {
			a.Reason = strings.Join(a.Missing, ", ") + " missing"
		}
		return a
	}
	a.Format = o.Parts[0].Format
	ordered := make([]*assemblySlot, len(o.Order))
	for i, idx := range o.Order {
		ordered[i] = slots[idx]
	}

	// Try the copies, the largest of each part first, one part varied at a
	// time from the last: a truncated or corrupt copy shows in the listing.
	var tried []struct {
		order []int
		l     Listing
		err   error
	}
	for _, combo := range combinations(ordered, maxCombinations) {
		l, err := list(a.Format, combo)
		tried = append(tried, struct {
			order []int
			l     Listing
			err   error
		}{combo, l, err})
		if err == nil {
			break
		}
	}
	best := tried[len(tried)-1]
	if best.err != nil {
		// None verified: keep the first try (the largest copies), unless a
		// later one went further without a missing volume.
		best = tried[0]
		for _, t := range tried[1:] {
			if errors.Is(best.err, ErrVolumeMissing) && !errors.Is(t.err, ErrVolumeMissing) {
				best = t
			}
		}
	}
	a.Order, a.Listing, a.Err = best.order, best.l, best.err
	if best.l.Format != "" {
		a.Format = best.l.Format
	}
	a.Verified = best.err == nil
	a.Complete = true

	chosen := map[int]bool{}
	for _, i := range a.Order {
		chosen[i] = true
	}
	for _, s := range ordered {
		for _, i := range s.copies {
			if chosen[i] {
				continue
			}
			reason := "another copy of " + cands[i].Name + " makes the set valid"
			if !a.Verified {
				reason = "another copy of " + cands[i].Name + " was chosen (neither makes the set valid)"
			}
			// Blame the copy only for a try that differs from the chosen
			// copies in it alone.
			for _, t := range tried {
				if t.err != nil && slices.Contains(t.order, i) && differsOnce(t.order, a.Order) {
					reason = "a copy that does not make the set valid: " + t.err.Error()
					break
				}
			}
			a.Rejected = append(a.Rejected, Rejected{i, reason})
		}
	}
	slices.SortFunc(a.Rejected, func(x, y Rejected) int { return cmp.Compare(x.Index, y.Index) })

	// The names were whole but the bytes say a volume follows the last
	// (RAR), or the concatenation stops before its end (a byte split).
	scheme := o.Parts[0].Scheme
	last := o.Parts[len(o.Parts)-1]
	if errors.Is(a.Err, ErrVolumeMissing) || scheme == SchemeNumbered && errors.Is(a.Err, ErrCutShort) {
		if scheme != SchemeNone && scheme != SchemeZipSplit {
			a.Complete = false
			a.Missing = []string{PartName(o.Parts, last.Part+1)}
			a.Reason = fmt.Sprintf("%s missing (%s)", a.Missing[0], a.Err)
		}
	}
	return a
}

// assemblySlot is one part of a set: the distinct copies posted under its
// name, largest first.
type assemblySlot struct {
	base   string
	copies []int
}

// combinations returns choices of one copy per slot, in the order they
// are worth trying: all largest copies, then each other copy of each slot
// (from the last slot) with the largest of the rest, then the rest of the
// product, at most limit in all.
func combinations(slots []*assemblySlot, limit int) [][]int {
	var out [][]int
	seen := map[string]bool{}
	add := func(pick []int) bool {
		combo := make([]int, len(slots))
		for i, s := range slots {
			combo[i] = s.copies[pick[i]]
		}
		key := fmt.Sprint(combo)
		if !seen[key] {
			seen[key] = true
			out = append(out, combo)
		}
		return len(out) < limit
	}
	pick := make([]int, len(slots))
	if !add(pick) {
		return out
	}
	for i := len(slots) - 1; i >= 0; i-- {
		for c := 1; c < len(slots[i].copies); c++ {
			pick := make([]int, len(slots))
			pick[i] = c
			if !add(pick) {
				return out
			}
		}
	}
	// The product, as an odometer turning its last digit fastest.
	for {
		i := len(slots) - 1
		for ; i >= 0; i-- {
			if pick[i]++; pick[i] < len(slots[i].copies) {
				break
			}
			pick[i] = 0
		}
		if i < 0 || !add(pick) {
			return out
		}
	}
}

// PartName returns the file name part number part of the set the names
// belong to would be posted under, following their scheme and digit count
// (lower-cased, as Name.Base is): "x.r01" for part 3 of x.rar, x.r00 ….
func PartName(names []Name, part int) string {
	var n Name
	for _, x := range names {
		if x.IsMultipart() {
			n = x
			break
		}
	}
	switch n.Scheme {
	case SchemeRarOld:
		stem := strings.TrimSuffix(n.Set, ".rar")
		if part <= 1 {
			return n.Set
		}
		k := part - 2
		return fmt.Sprintf("%s.%c%02d", stem, 'r'+rune(k/100), k%100)
	case SchemeRarPart:
		stem := strings.TrimSuffix(n.Set, ".rar")
		width := 1
		for _, x := range names {
			if x.Scheme == SchemeRarPart {
				digits := strings.TrimSuffix(x.Base, ".rar")
				digits = digits[strings.LastIndex(digits, ".part")+len(".part"):]
				width = max(width, len(digits))
			}
		}
		return fmt.Sprintf("%s.part%0*d.rar", stem, width, part)
	case SchemeNumbered:
		return fmt.Sprintf("%s.%03d", n.Set, part)
	case SchemeZipSplit:
		return fmt.Sprintf("%s.z%02d", strings.TrimSuffix(n.Set, ".zip"), part)
	}
	return fmt.Sprintf("part %d", part)
}

// differsOnce reports whether x and y differ in exactly one position.
func differsOnce(x, y []int) bool {
	n := 0
	for i := range x {
		if x[i] != y[i] {
			n++
		}
	}
	return n == 1
}
