// Package caption renders the caption stashd writes under every document it
// sends: an operator's template filled with the package's fields, an
// optional warning line, and the delivery token as the last line. It owns
// the template syntax and Telegram's caption length limit; it knows nothing
// of the catalogue or of Telegram requests.
package caption

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
)

// Limit is Telegram's caption length limit for accounts without Premium
// (message_caption_length_max), counted in UTF-16 code units as Telegram
// counts it.
const Limit = 1024

// Default reproduces the caption stashd wrote before captions could be
// configured: the package name, then "(part i/n)" for a multipart set.
const Default = "{name} ({parts})"

// Placeholders are the names a template may use, each between braces.
var Placeholders = []string{"name", "size", "source", "date", "parts", "link"}

// Fields are the values of one caption's placeholders.
type Fields struct {
	Name   string // the package name
	Size   int64  // the package's total size in bytes, shown as 12.3 MiB
	Source string // the source chat's @username, or its title
	Date   string // the source message's date, UTC, YYYY-MM-DD
	Parts  string // "part 2/5", "" for a single file
	Link   string // the t.me link of the source message, "" when none
}

// Template is a parsed caption template.
type Template struct {
	text string
}

// Parse checks a template: every {placeholder} must be one of
// Placeholders, and braces must pair. An empty text is Default.
func Parse(text string) (Template, error) {
	if text == "" {
		text = Default
	}
	rest := text
	for {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			break
		}
		if rest[open] == '}' {
			return Template{}, errors.New("unmatched } in caption template")
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return Template{}, errors.New("unmatched { in caption template")
		}
		name := rest[open+1 : open+end]
		if !known(name) {
			return Template{}, fmt.Errorf("unknown placeholder {%s} in caption template (known: {%s})", name, strings.Join(Placeholders, "}, {"))
		}
		rest = rest[open+end+1:]
	}
	return Template{text: text}, nil
}

func known(name string) bool {
	for _, p := range Placeholders {
		if p == name {
			return true
		}
	}
	return false
}

// String returns the template's text.
func (t Template) String() string { return t.text }

// Render returns the caption: warning (when not "") as its first line, the
// template filled with f, and tokenLine as the last line. The whole stays
// within Limit: when it would not, the template text is cut (ending in
// "…"), then the warning; the token line is never cut, so reconciliation
// finds it whatever the template. A parenthesised group whose
// placeholders all came out empty is dropped with the space before it, so
// that "{name} ({parts})" reads "a.zip" for a single file.
func (t Template) Render(f Fields, warning, tokenLine string) string {
	if t.text == "" {
		t.text = Default
	}
	body := strings.TrimSpace(t.expand(f))
	budget := Limit - units(tokenLine)
	var head []string
	if warning != "" {
		head = append(head, warning)
	}
	if body != "" {
		head = append(head, body)
	}
	text := strings.Join(head, "\n")
	if text == "" {
		return tokenLine
	}
	// One unit for the newline before the token line.
	text = cut(text, budget-1)
	if text == "" {
		return tokenLine
	}
	return text + "\n" + tokenLine
}

// expand fills the template's placeholders.
func (t Template) expand(f Fields) string {
	values := map[string]string{
		"name": f.Name, "size": HumanSize(f.Size), "source": f.Source,
		"date": f.Date, "parts": f.Parts, "link": f.Link,
	}
	if f.Size <= 0 {
		values["size"] = ""
	}
	var b strings.Builder
	rest := t.text
	// groupStart is where the open parenthesised group began in b (-1:
	// none), and groupFilled whether one of its placeholders had a value.
	groupStart, groupHad, groupFilled := -1, false, false
	for rest != "" {
		switch c := rest[0]; {
		case c == '(':
			groupStart, groupHad, groupFilled = b.Len(), false, false
			b.WriteByte(c)
			rest = rest[1:]
		case c == ')':
			b.WriteByte(c)
			rest = rest[1:]
			if groupStart >= 0 && groupHad && !groupFilled {
				s := strings.TrimRight(b.String()[:groupStart], " ")
				b.Reset()
				b.WriteString(s)
			}
			groupStart = -1
		case c == '{':
			end := strings.IndexByte(rest, '}')
			v := values[rest[1:end]]
			groupHad = true
			if v != "" {
				groupFilled = true
			}
			b.WriteString(v)
			rest = rest[end+1:]
		default:
			b.WriteByte(c)
			rest = rest[1:]
		}
	}
	return b.String()
}

// cut shortens s to at most max UTF-16 units, ending in "…" when cut.
func cut(s string, max int) string {
	if units(s) <= max {
		return s
	}
	if max <= 1 {
		return ""
	}
	n := 0
	for i, r := range s {
		w := utf16.RuneLen(r)
		if w < 0 {
			w = 1
		}
		if n+w > max-1 {
			return strings.TrimRight(s[:i], " \n") + "…"
		}
		n += w
	}
	return s
}

// units is the length of s as Telegram counts it: UTF-16 code units.
func units(s string) int {
	n := 0
	for _, r := range s {
		if w := utf16.RuneLen(r); w > 0 {
			n += w
		} else {
			n++
		}
	}
	return n
}

// Units is the length of s in UTF-16 code units, the unit of Limit.
func Units(s string) int { return units(s) }

// HumanSize shows n bytes in binary units with one decimal: 12.3 MiB.
func HumanSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
