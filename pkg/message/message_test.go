package message

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestBoundTo(t *testing.T) {
	cases := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{name: "short", in: "abc", n: 10, want: "abc"},
		{name: "exactly the limit", in: "abcde", n: 5, want: "abcde"},
		{name: "cut with ellipsis", in: "abcdefgh", n: 6, want: "abc…"},
		{name: "empty", in: "", n: 0, want: ""},
		{name: "limit below the ellipsis", in: "abcdef", n: 2, want: "ab"},
		{name: "zero limit", in: "abc", n: 0, want: ""},
		{name: "negative limit", in: "abc", n: -1, want: ""},
		// "é" is two bytes: the cut at 4 bytes would split the second one.
		{name: "does not split a two-byte rune", in: "aééé", n: 7, want: "aééé"},
		{name: "cut before a two-byte rune", in: "aééé", n: 6, want: "aé…"},
		{name: "cut inside a two-byte rune", in: "aééé", n: 5, want: "a…"},
		{name: "does not split a four-byte rune", in: "😀😀😀", n: 9, want: "😀…"},
		{name: "limit below the ellipsis does not split a rune", in: "éé", n: 1, want: ""},
		{name: "invalid UTF-8 kept as bytes", in: "\xff\xff\xff\xff\xff", n: 4, want: "\xff…"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := BoundTo(tc.in, tc.n)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("BoundTo(%q, %d) (-want +got):\n%s", tc.in, tc.n, diff)
			}
			if len(got) > max(tc.n, 0) {
				t.Errorf("BoundTo(%q, %d) is %d bytes", tc.in, tc.n, len(got))
			}
		})
	}
}

func TestBound(t *testing.T) {
	cases := []struct {
		name    string
		in      string
		wantLen int
		cut     bool
	}{
		{name: "under the limit", in: strings.Repeat("a", MaxLen-1), wantLen: MaxLen - 1},
		{name: "at the limit", in: strings.Repeat("a", MaxLen), wantLen: MaxLen},
		{name: "over the limit", in: strings.Repeat("a", MaxLen+1), wantLen: MaxLen, cut: true},
		// Two-byte runes: the cut at MaxLen-3 bytes falls inside one.
		{name: "an annotation's worth", in: strings.Repeat("ü", 128*1024), wantLen: MaxLen - 1, cut: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Bound(tc.in)
			if len(got) != tc.wantLen {
				t.Errorf("len(Bound) = %d, want %d", len(got), tc.wantLen)
			}
			if !utf8.ValidString(got) {
				t.Errorf("Bound gave invalid UTF-8: %q", got[len(got)-8:])
			}
			if cut := strings.HasSuffix(got, ellipsis); cut != tc.cut {
				t.Errorf("ends in an ellipsis: %t, want %t", cut, tc.cut)
			}
		})
	}
}
