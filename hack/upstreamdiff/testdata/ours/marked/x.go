package x

import "fmt"

// timeshare: outside a body this marks nothing.

// Upstream's original: F in example.com/up/p.
func F(a int) string {
	s := fmt.Sprint(a)
	// timeshare: a prefix of ours.
	s = "n=" + s
	// Not a marker.
	return s
}

// Upstream's original: G in example.com/up/p.
func G() int { return 1 }
