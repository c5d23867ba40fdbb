package metrics

import (
	"sync"
	"time"
)

// decisionTTL bounds how long a decision is remembered when its protection has no known end.
const decisionTTL = 24 * time.Hour

// Decisions remembers which decisions were counted already, so that a counter counts each
// decision once (a candidate protected from a preemptor, a workload nominated for its expected
// runtime) instead of once per victim search: a pending workload is searched for every few
// seconds while it waits. A decision is forgotten once it expires.
type Decisions struct {
	mu      sync.Mutex
	expires map[string]time.Time
	swept   time.Time
}

// NewDecisions returns an empty log.
func NewDecisions() *Decisions {
	return &Decisions{expires: map[string]time.Time{}}
}

// First records the decision key at now, remembered until expires (zero: for decisionTTL), and
// reports whether it is new. Expired decisions are dropped at most once a minute.
func (d *Decisions) First(key string, now, expires time.Time) bool {
	if expires.IsZero() || expires.Before(now) {
		expires = now.Add(decisionTTL)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if now.Sub(d.swept) > time.Minute {
		for k, e := range d.expires {
			if !e.After(now) {
				delete(d.expires, k)
			}
		}
		d.swept = now
	}
	if e, ok := d.expires[key]; ok && e.After(now) {
		return false
	}
	d.expires[key] = expires
	return true
}

// Len is how many decisions are remembered.
func (d *Decisions) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.expires)
}
