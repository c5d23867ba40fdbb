package x

import "fmt"

// Upstream's original: F in example.com/up/p.
func F(a int) string {
	// timeshare: a mark does not cover a deletion a kept line away.
	a++
	s := fmt.Sprint(a)
}
