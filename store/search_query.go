package store

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"stashd/tg"
)

// SearchQuery asks the catalogue for packages whose name or listed paths
// contain Text. Zero fields do not filter.
type SearchQuery struct {
	// Text is matched as a substring, ignoring case, against package names
	// and every listed path. Empty: every package, newest first.
	Text string
	// Format keeps packages of this format (zip, rar, 7z, tar…).
	Format string
	// MinSize and MaxSize bound the package's total size in bytes; zero
	// means no bound.
	MinSize, MaxSize int64
	// Source keeps packages posted in this chat (as origin or as a
	// duplicate re-post).
	Source tg.ChatID
	// Since and Until bound when the package was catalogued.
	Since, Until time.Time
	// Limit is the page size; zero means 50, at most 500.
	Limit int
	// Cursor continues a previous page (SearchPage.Next); empty starts.
	Cursor string
}

// Match ranks, best first: a package name containing the text, a listed
// file named exactly the text, a file name starting with it, a file path
// containing it elsewhere.
const (
	RankName       = 0
	RankFileExact  = 1
	RankFilePrefix = 2
	RankFilePath   = 3
)

// ErrBadCursor is returned for a cursor that Search did not make.
var ErrBadCursor = errors.New("bad search cursor")

// searchRank is one rank of a text.
type searchRank struct {
	rank int
	// has is true for the packages with a match of this rank, as SQL over
	// p (packages) and s (package_search, NULL for a package without
	// listed files), with the text's patterns as arguments.
	has func(a *searchArgs) string
	// files, for the file ranks, keeps listed files (f) of the rank's
	// packages and, for the path rank, of the ranks before it. It is
	// answered per file: base names from package_files_base_name, paths
	// from package_files_path_trgm. (A trigram index over package_search
	// would not do: a whole listing holds the trigrams of most texts, so
	// nearly every package would be a candidate.)
	files func(a *searchArgs) string
}

// searchRanks returns the ranks of a text, best first.
func searchRanks(text string) []searchRank {
	if text == "" {
		return []searchRank{{rank: RankName, has: func(*searchArgs) string { return "true" }}}
	}
	esc := likeEscape(text)
	path := func(a *searchArgs) string { return "f.path ILIKE " + a.add("%"+esc+"%") }
	exact := func(a *searchArgs) string { return baseName + " = lower(" + a.add(text) + "::text)" }
	prefix := func(a *searchArgs) string { return baseName + " LIKE lower(" + a.add(esc+"%") + "::text)" }
	if utf8.RuneCountInString(text) > baseNameChars {
		// Past what the base-name index holds: such a text is rare,
		// and the trigram index finds its files.
		exact, prefix = path, path
	}
	return []searchRank{
		{rank: RankName, has: func(a *searchArgs) string { return "p.name ILIKE " + a.add("%"+esc+"%") }},
		{rank: RankFileExact,
			has:   func(a *searchArgs) string { return "s.names LIKE lower(" + a.add("%\n"+esc+"\n%") + "::text)" },
			files: exact},
		{rank: RankFilePrefix,
			has:   func(a *searchArgs) string { return "s.names LIKE lower(" + a.add("%\n"+esc+"%") + "::text)" },
			files: prefix},
		{rank: RankFilePath,
			has:   func(a *searchArgs) string { return "s.paths LIKE lower(" + a.add("%"+esc+"%") + "::text)" },
			files: path},
	}
}

// only returns SQL true for the packages whose best match is of rank i:
// it has a match of rank i and none better. The file ranks nest (a file
// named exactly the text starts with it, and contains it), so a match of
// rank i excludes the rank before it and the name rank only.
func only(ranks []searchRank, i int, a *searchArgs) string {
	sql := ranks[i].has(a)
	if i > 1 {
		sql += " AND NOT " + ranks[i-1].has(a)
	}
	if i > 0 {
		sql += " AND NOT " + ranks[0].has(a)
	}
	return sql
}

// isShort reports whether text is too short to have a trigram.
func isShort(text string) bool {
	return text != "" && utf8.RuneCountInString(text) < shortText
}

// likeEscape escapes LIKE's wildcards so that text matches literally.
func likeEscape(text string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(text)
}

func encodeCursor(rank int, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(rank) + "." + strconv.FormatInt(id, 10)))
}

func decodeCursor(c string) (int, int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, 0, ErrBadCursor
	}
	r, i, ok := strings.Cut(string(b), ".")
	rank, err1 := strconv.Atoi(r)
	id, err2 := strconv.ParseInt(i, 10, 64)
	if !ok || err1 != nil || err2 != nil || rank < 0 || id <= 0 {
		return 0, 0, ErrBadCursor
	}
	return rank, id, nil
}
