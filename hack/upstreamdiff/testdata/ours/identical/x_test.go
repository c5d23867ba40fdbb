package x

// Upstream's original: Nowhere in example.com/up/p.
func Nowhere() {}
