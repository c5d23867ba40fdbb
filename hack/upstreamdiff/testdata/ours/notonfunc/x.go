package x

// Upstream's original: T in example.com/up/p.
type T struct{}

func f() {
	// Upstream's original: G in example.com/up/p.
}
