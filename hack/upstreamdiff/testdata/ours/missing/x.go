package x

// Upstream's original: (*T).Gone in example.com/up/p.
func (t *T) Gone() {}

// Upstream's original: H in example.com/up/p.
func H() int { return 2 }

// Upstream's original: G in example.com/up/p.
func G() int { return 1 }
