package x

import upper "strings"

type T struct{}

// Upstream's original: (*T).M in example.com/up/p.
func (t *T) M(s string) string {
	return upper.ToUpper(s)
}
