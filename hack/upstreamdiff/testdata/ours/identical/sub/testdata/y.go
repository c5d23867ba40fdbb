package y

// Upstream's original: Nowhere in example.com/up/p.
func Nowhere() {}
