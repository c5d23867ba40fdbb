package x

// Upstream's original: G and F in example.com/up/p.
func FG(a int) string {
	return ""
}
