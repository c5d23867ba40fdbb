package x

import (
	"fmt"
	"strings"
)

type T struct{}

// Upstream's original: F in example.com/up/p.
func F(a int) string {
	s := fmt.Sprint(a)
	// timeshare: the statement after a mark, and the upstream line it replaces.
	return "n=" + s
}

// Upstream's original: Pair in example.com/up/p.
func Pair(a int) []int {
	return []int{
		a,
		a + 1,
		a + 2, // timeshare: a trailing mark covers the element it trails.
	}
}

// Upstream's original: G in example.com/up/p.
// timeshare: the last line of the doc comment covers the signature.
func G() string { return "1" }

// Upstream's original: Call in example.com/up/p.
func Call(a int) string {
	return fmt.Sprint(
		a,
		// timeshare: an argument of ours.
		a+2,
	)
}

// Upstream's original: (*T).M in example.com/up/p.
func (t *T) M(s string) string {
	// timeshare: this covers the next statement only.
	x := s
	return strings.ToLower(x)
}
