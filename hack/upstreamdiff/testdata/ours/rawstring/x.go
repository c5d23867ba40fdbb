package x

import "fmt"

// Upstream's original: F in example.com/up/p.
func F(a int) string {
	s := fmt.Sprint(a)
	_ = `a raw string

with a blank line`
	// timeshare: the mark still covers the statement after it.
	s += "!"
	return s
}
