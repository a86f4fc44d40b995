package bench

import (
	"strings"
	"testing"
)

// statementName names a statement as its whitespace-joined words cut to
// 90 bytes would, without reading past them.
func TestStatementNameIsTheFirstWordsOfAStatement(t *testing.T) {
	long := "WITH pkg AS (\n\tINSERT INTO packages (content_hash, name)\n\tVALUES ($1, $2)\n" + strings.Repeat("\t x ", 2000)
	for _, sql := range []string{"", "  \n\t ", "SELECT 1", "  SELECT\n\t\t1  ", long, countPackages, countSent,
		"batch of 9: " + long, strings.Repeat("a", 89) + " b", strings.Repeat("a", 90) + " b", strings.Repeat("a", 88) + "\n\n b c"} {
		want := strings.Join(strings.Fields(sql), " ")
		if len(want) > 90 {
			want = want[:90]
		}
		if got := statementName(sql); got != want {
			t.Errorf("statementName(%.40q) = %q, want %q", sql, got, want)
		}
	}
}
