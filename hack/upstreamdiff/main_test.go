package main

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompare(t *testing.T) {
	up, err := filepath.Abs(filepath.Join("testdata", "up"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		dir string
		// want: per mirror, "name: +added -removed" or "name: MISSING ..." in file order.
		want     []string
		problems int
		ok       bool
		// contains are strings the full output must have.
		contains []string
	}{
		{
			dir:      "identical",
			want:     []string{"F: +0 -0"},
			ok:       true,
			contains: []string{"x.go   ", "1 functions,   1 identical, +0    -0"},
		},
		{
			dir:  "additions",
			want: []string{"F: +2 -1", "G: +0 -0"},
			ok:   true,
			contains: []string{
				"--- example.com/up@v1/p/p.go: F\n+++ x.go:5: F\n@@ -1,4 +1,5 @@\n func F(a int) string {\n+\tvar prefix = \"n=\"\n \ts := fmt.Sprint(a)\n-\treturn s\n+\treturn prefix + s\n }\n",
				"2 functions,   1 identical, +2    -1",
			},
		},
		{
			dir:      "marked",
			want:     []string{"F: +1 -0", "G: +0 -0"},
			ok:       true,
			contains: []string{"2 functions,   1 identical, +1    -0      1 marked"},
		},
		{
			dir:  "renamedimport",
			want: []string{"(*T).M: +0 -0"},
			ok:   true,
		},
		{
			dir:      "twooriginals",
			want:     []string{"FG: +2 -4"},
			ok:       true,
			contains: []string{"--- example.com/up@v1/p/p.go: G and F\n"},
		},
		{
			dir:  "missing",
			want: []string{"(*T).Gone: MISSING (*T).Gone", "H: MISSING H", "G: +0 -0"},
			contains: []string{
				"MISSING: x.go:3: (*T).Gone names (*T).Gone in p, which example.com/up@v1 does not have",
				"MISSING: x.go:6: H names H in p",
			},
		},
		{dir: "badline", problems: 2, contains: []string{
			`BAD CONVENTION LINE: x.go:3: "part of G" is not a function or (*Recv).method`,
			"BAD CONVENTION LINE: x.go:6: package example.com/other is not in module example.com/up",
		}},
		{dir: "notonfunc", problems: 2, contains: []string{
			"BAD CONVENTION LINE: x.go:3: convention line is not in a function's doc comment",
			"BAD CONVENTION LINE: x.go:7: convention line is not in a function's doc comment",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			r, err := compare(filepath.Join("testdata", "ours", tc.dir), "example.com/up", up)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range r.mirrors {
				if len(m.missing) > 0 {
					got = append(got, m.name+": MISSING "+joinOriginals(m.missing))
					continue
				}
				a, d := counts(m.diff)
				got = append(got, m.name+": +"+itoa(a)+" -"+itoa(d))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("mirrors (-want +got):\n%s", diff)
			}
			if len(r.problems) != tc.problems {
				t.Errorf("problems: got %q, want %d", r.problems, tc.problems)
			}
			var out bytes.Buffer
			if ok := r.write(&out, "example.com/up@v1", false, false); ok != tc.ok {
				t.Errorf("write reported ok=%v, want %v", ok, tc.ok)
			}
			for _, s := range tc.contains {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestLineDiff(t *testing.T) {
	cases := []struct {
		a, b []string
		want string
	}{
		{a: nil, b: nil, want: ""},
		{a: []string{"x"}, b: []string{"x"}, want: " x\n"},
		{a: []string{"a", "b", "c"}, b: []string{"a", "c", "d"}, want: " a\n-b\n c\n+d\n"},
		{a: []string{"a"}, b: []string{"b"}, want: "-a\n+b\n"},
	}
	for _, tc := range cases {
		var b strings.Builder
		for _, l := range lineDiff(tc.a, tc.b) {
			b.WriteString(string(l.op) + l.text + "\n")
		}
		if got := b.String(); got != tc.want {
			t.Errorf("lineDiff(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestWriteUnifiedHunks(t *testing.T) {
	var a, b []string
	for i := range 20 {
		l := string(rune('a' + i))
		a = append(a, l)
		if i == 2 {
			l = "X"
		}
		if i == 15 {
			b = append(b, "Y")
		}
		b = append(b, l)
	}
	var out strings.Builder
	writeUnified(&out, lineDiff(a, b), 3)
	want := "@@ -1,6 +1,6 @@\n a\n b\n-c\n+X\n d\n e\n f\n" +
		"@@ -13,6 +13,7 @@\n m\n n\n o\n+Y\n p\n q\n r\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("hunks (-want +got):\n%s", diff)
	}
}

func TestStrict(t *testing.T) {
	up, err := filepath.Abs(filepath.Join("testdata", "up"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		dir string
		// want: per mirror, "name: +added -removed" of the lines no mark covers, in file order.
		want []string
		ok   bool
		// contains are strings the -strict output must have.
		contains []string
	}{
		{dir: "identical", want: []string{"F: +0 -0"}, ok: true},
		{dir: "marked", want: []string{"F: +0 -0", "G: +0 -0"}, ok: true, contains: []string{"unmarked +0 -0\n"}},
		{
			dir:  "additions",
			want: []string{"F: +2 -1", "G: +0 -0"},
			contains: []string{
				"UNMARKED: x.go:5: F has 2 added and 1 removed lines no mark covers:\n  +\tvar prefix = \"n=\"\n  -\treturn s\n  +\treturn prefix + s\n",
				"2 functions,   1 identical, +2    -1      0 marked, unmarked +2 -1\n",
			},
		},
		{
			dir:  "covering",
			want: []string{"F: +0 -0", "Pair: +0 -0", "G: +0 -0", "Call: +0 -0", "(*T).M: +1 -0"},
			contains: []string{
				"UNMARKED: x.go:39: (*T).M has 1 added and 0 removed lines no mark covers:\n  +\treturn str.ToLower(x)\n",
				"5 functions,   0 identical, +6    -4      5 marked, unmarked +1 -0\n",
			},
		},
		{
			// printFunc drops the blank line inside the string; the lines after it still map.
			dir:      "rawstring",
			want:     []string{"F: +2 -0"},
			contains: []string{"UNMARKED: x.go:5: F has 2 added and 0 removed lines no mark covers:\n  +\t_ = `a raw string\n  +with a blank line`\n"},
		},
		{
			dir:      "deletion",
			want:     []string{"F: +0 -1"},
			contains: []string{"UNMARKED: x.go:5: F has 0 added and 1 removed lines no mark covers:\n  -\treturn s\n"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			r, err := compare(filepath.Join("testdata", "ours", tc.dir), "example.com/up", up)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range r.mirrors {
				a, d := m.unmarkedCounts()
				got = append(got, m.name+": +"+itoa(a)+" -"+itoa(d))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("unmarked lines (-want +got):\n%s", diff)
			}
			var out bytes.Buffer
			if ok := r.write(&out, "example.com/up@v1", true, true); ok != tc.ok {
				t.Errorf("write -strict reported ok=%v, want %v:\n%s", ok, tc.ok, out.String())
			}
			for _, s := range tc.contains {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, out.String())
				}
			}
			// Without -strict, unmarked lines are counted but fail nothing.
			if !r.write(&bytes.Buffer{}, "example.com/up@v1", true, false) {
				t.Error("write without -strict reported a failure")
			}
		})
	}
}
