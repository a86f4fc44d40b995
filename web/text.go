package web

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// Printable returns s with every control, format (bidirectional overrides,
// zero-width characters) and invalid UTF-8 rune written as a Go escape
// (\x1b, \n, \u202e), so that a hostile name can neither drive a terminal
// nor reorder or hide what is shown around it. Backslashes are doubled so
// that an escape in the output always means an escaped rune.
func Printable(s string) string {
	if !HasHidden(s) && !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == unicode.ReplacementChar && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case needsEscape(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// HasHidden reports whether Printable would escape something other than a
// backslash: the name carries characters a reader cannot see.
func HasHidden(s string) bool {
	for i, r := range s {
		if needsEscape(r) || (r == unicode.ReplacementChar && !strings.HasPrefix(s[i:], "\uFFFD")) {
			return true
		}
	}
	return false
}

func needsEscape(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}

// FormatSize writes n bytes in binary units (KiB, MiB…), exact below 1 KiB.
func FormatSize(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// ParseSize reads a size: bytes, or a number with a unit K, M, G or T
// (powers of 1024; an optional "B" or "iB" after it), e.g. 500, 10M,
// 1.5GiB. Empty is zero.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	if t == "" {
		return 0, nil
	}
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		if i := strings.IndexByte("KMGT", t[n-1]); i >= 0 {
			mult = int64(1) << (10 * (i + 1))
			t = strings.TrimSpace(t[:n-1])
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || f*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("%q is not a size (e.g. 500, 10M, 1.5G)", s)
	}
	return int64(f * float64(mult)), nil
}
