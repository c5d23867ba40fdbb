// Package policytest helps test a feature's plugin at the preemptor's extension points without
// a preemptor.
package policytest

import (
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Handle is a policy.Handle with a fixed clock that remembers the decisions a plugin counted.
type Handle struct {
	At        time.Time
	Given     policy.Sources
	Writer    client.Client
	ReplicaOf string
	seen      map[string]bool
}

var _ policy.Handle = &Handle{}

func (h *Handle) Sources() policy.Sources { return h.Given }
func (h *Handle) Now() time.Time          { return h.At }
func (h *Handle) Role() string            { return h.ReplicaOf }
func (h *Handle) Log() logr.Logger        { return logr.Discard() }
func (h *Handle) Client() client.Client   { return h.Writer }

// First reports whether key is new; keys never expire.
func (h *Handle) First(key string, _ time.Time) bool {
	if h.seen[key] {
		return false
	}
	if h.seen == nil {
		h.seen = map[string]bool{}
	}
	h.seen[key] = true
	return true
}
