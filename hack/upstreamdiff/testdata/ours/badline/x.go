package x

// Upstream's original: part of G in example.com/up/p.
func G() int { return 1 }

// Upstream's original: G in example.com/other.
func G2() int { return 1 }
