package x

import "fmt"

// Upstream's original: F in example.com/up/p.
func F(a int) string {
	// A local declaration's doc comment.
	var prefix = "n="
	s := fmt.Sprint(a)
	return prefix + s
}

// Upstream's original: G in example.com/up/p.
func G() int { return 1 }
