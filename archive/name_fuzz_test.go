package archive

import (
	"slices"
	"strings"
	"testing"
	"unicode"
)

// FuzzParseName feeds arbitrary file names to ParseName and, split on
// newlines, to OrderParts. Nothing may panic; a name's Base carries no
// directory and no control character; a part number is within 1..9999
// and only on a multipart name; a complete order is a permutation of the
// names given, in ascending part order.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{
		"model.zip", "Model.Part01.RAR\nmodel.part02.rar\nmodel.part3.rar", "set.z01\nset.z02\nset.zip",
		"x.rar\nx.r00\nx.r01", "pack.7z.001\npack.7z.002", "pack.tar.gz", "a/b\\c.tar.zst", "x.part0.rar",
		"x.rar.00001", "x.000", "evil\x1b[31m.zip", "\xff\xfe.zip", " .ZIP ", "dup.part1.rar\ndup.part1.rar",
		"a.part1.rar\nb.part2.rar", "x.zip\nx.zip\nx.z01", "İSTANBUL.ZIP", strings.Repeat("a.", 200) + "rar",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		lines := strings.Split(in, "\n")
		if len(lines) > 64 {
			lines = lines[:64]
		}
		names := make([]Name, len(lines))
		for i, l := range lines {
			n := ParseName(l)
			names[i] = n
			if strings.ContainsAny(n.Base, `/\`) || strings.IndexFunc(n.Base, unicode.IsControl) >= 0 {
				t.Fatalf("ParseName(%q).Base = %q: a directory or a control character left", l, n.Base)
			}
			if n.IsMultipart() != (n.Part > 0) || n.Part > 9999 || n.Part < 0 {
				t.Fatalf("ParseName(%q) = %+v: part %d with set %q", l, n, n.Part, n.Set)
			}
			if n.IsMultipart() && !n.IsArchive() {
				t.Fatalf("ParseName(%q) = %+v: a part of no format", l, n)
			}
			if n.Final {
				t.Fatalf("ParseName(%q) set Final", l)
			}
		}
		o := OrderParts(names)
		if !o.Complete {
			if o.Order != nil || o.Parts != nil || o.Reason == "" {
				t.Fatalf("OrderParts(%q): incomplete %+v without a reason or with an order", lines, o)
			}
			return
		}
		if len(o.Order) != len(names) || len(o.Parts) != len(names) {
			t.Fatalf("OrderParts(%q): order %v of %d names", lines, o.Order, len(names))
		}
		seen := slices.Clone(o.Order)
		slices.Sort(seen)
		for i, v := range seen {
			if v != i {
				t.Fatalf("OrderParts(%q): order %v is not a permutation", lines, o.Order)
			}
		}
		for i := 1; i < len(o.Parts); i++ {
			if a, b := o.Parts[i-1], o.Parts[i]; !a.Final && !b.Final && a.Part >= b.Part {
				t.Fatalf("OrderParts(%q): parts %d then %d", lines, a.Part, b.Part)
			}
		}
	})
}
