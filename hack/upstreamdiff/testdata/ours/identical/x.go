package x

import "fmt"

// F is a mirror with other comments and blank lines.
// Upstream's original: F in example.com/up/p.
func F(a int) string {
	s := fmt.Sprint(a) // a trailing comment

	return s
}
