package audit

import (
	"strings"
	"testing"

	"stashd/sim/tgsim"
)

// Each expectation is judged against what the catalogue and destinations
// show: right fates give no line, wrong ones say what happened.
func TestJudgeFile(t *testing.T) {
	t.Parallel()
	pkgOf := map[string]int64{"orig.zip": 7}
	// Package 9 is a repack of 8, itself linked as a repack of orig.zip's 7.
	group := repackGroups([]postedState{{pkg: 8, links: map[int64]string{7: "repack"}}, {pkg: 9, links: map[int64]string{8: "repack"}}})
	cases := []struct {
		name  string
		e     tgsim.Expectation
		s     postedState
		set   string
		wrong string // "" when right
	}{
		{"delivered", tgsim.Expectation{Expect: "delivered", Format: "zip"}, postedState{delivered: 2, pkg: 1, format: "zip"}, "", ""},
		{"delivered to one of two", tgsim.Expectation{Expect: "delivered"}, postedState{delivered: 1}, "", "in 1 of 2 destinations"},
		{"format by magic", tgsim.Expectation{Expect: "delivered", Format: "rar"}, postedState{delivered: 2, pkg: 1, format: "zip"}, "", `catalogued as "zip", want "rar"`},
		{"dead letter on another part", tgsim.Expectation{Expect: "dead_letter", Reason: "x.r01 missing"}, postedState{}, "set: x.r01 missing (rar)", ""},
		{"dead letter, other reason", tgsim.Expectation{Expect: "dead_letter", Reason: "x.r01 missing"}, postedState{deadLetter: "part 3 missing"}, "", "does not say"},
		{"dead letter but delivered", tgsim.Expectation{Expect: "dead_letter", Reason: "r"}, postedState{deadLetter: "r", delivered: 1}, "", "delivered to 1"},
		{"empty file", tgsim.Expectation{Expect: "not_archive"}, postedState{outcome: "package", delivered: 2}, "", `outcome "package", want not_archive`},
		{"rejected copy", tgsim.Expectation{Expect: "rejected"}, postedState{rejected: "a copy that does not make the set valid"}, "", ""},
		{"rejected, unrecorded", tgsim.Expectation{Expect: "rejected"}, postedState{}, "", "no rejected copy recorded"},
		{"repack linked", tgsim.Expectation{Expect: "repack", RepackOf: "orig.zip"}, postedState{links: map[int64]string{7: "repack"}}, "", ""},
		{"repack linked through another repack", tgsim.Expectation{Expect: "repack", RepackOf: "orig.zip"}, postedState{pkg: 9, links: map[int64]string{8: "repack"}}, "", ""},
		{"repack delivered", tgsim.Expectation{Expect: "repack", RepackOf: "orig.zip"}, postedState{delivered: 2}, "", "not linked as a repack"},
		{"duplicate", tgsim.Expectation{Expect: "duplicate"}, postedState{outcome: "duplicate", pkg: 1}, "", ""},
		{"duplicate catalogued before its twin", tgsim.Expectation{Expect: "duplicate"}, postedState{outcome: "package", pkg: 1, delivered: 2, twinDuplicate: true}, "", ""},
		{"duplicate catalogued alone", tgsim.Expectation{Expect: "duplicate"}, postedState{outcome: "package", pkg: 1, delivered: 2}, "", "delivered to 2"},
		{"flags", tgsim.Expectation{Expect: "delivered", Flags: []string{"name:bidi", "entry:unsafe", "suspicious"}},
			postedState{delivered: 2, nameFlags: []string{"bidi"}, entryUnsafe: true, suspicious: []string{"x"}}, "", ""},
		{"flag missing", tgsim.Expectation{Expect: "delivered", Flags: []string{"name:zero-width"}}, postedState{delivered: 2, nameFlags: []string{"bidi"}}, "", "not flagged name:zero-width"},
		{"flagged suspicious unexpectedly", tgsim.Expectation{Expect: "delivered"}, postedState{pkg: 1, delivered: 2, suspicious: []string{"23 bytes before the archive's first entry"}}, "", "flagged suspicious"},
	}
	for _, c := range cases {
		why := strings.Join(judgeFile(c.e, c.s, 2, c.set, pkgOf, group), "; ")
		if c.wrong == "" && why != "" || c.wrong != "" && !strings.Contains(why, c.wrong) {
			t.Errorf("%s: judged %q, want %q", c.name, why, c.wrong)
		}
	}
}
