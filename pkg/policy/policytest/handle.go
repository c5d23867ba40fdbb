// Package policytest helps test a feature's plugin at the preemptor's extension points without
// a preemptor.
package policytest

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/workload"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Handle is a policy.Handle with a fixed clock that remembers the decisions a plugin counted and
// the workloads it marked. It evicts nothing.
type Handle struct {
	At        time.Time
	Given     policy.Sources
	Writer    client.Client
	Events    events.EventRecorder
	ReplicaOf string
	// Indexed: Marked lists Marks, as a synced index; otherwise every workload must be read.
	Indexed bool
	Marks   map[workload.Reference]string
	seen    map[string]bool
}

var _ policy.Handle = &Handle{}

func (h *Handle) Sources() policy.Sources { return h.Given }
func (h *Handle) Now() time.Time          { return h.At }
func (h *Handle) Role() string            { return h.ReplicaOf }
func (h *Handle) Log() logr.Logger        { return logr.Discard() }
func (h *Handle) Client() client.Client   { return h.Writer }

func (h *Handle) Recorder() events.EventRecorder                   { return h.Events }
func (h *Handle) QueueLabels(kueue.ClusterQueueReference) []string { return nil }

// Marked lists the marked workloads, in no order, when Indexed.
func (h *Handle) Marked() ([]workload.Reference, bool) {
	if !h.Indexed {
		return nil, false
	}
	out := make([]workload.Reference, 0, len(h.Marks))
	for k := range h.Marks {
		out = append(out, k)
	}
	return out, true
}

// Mark records the mark in Marks.
func (h *Handle) Mark(key workload.Reference, mark string) {
	if h.Marks == nil {
		h.Marks = map[workload.Reference]string{}
	}
	h.Marks[key] = mark
}

// Evict evicts nothing: every target fails.
func (h *Handle) Evict(_ context.Context, _ *schdcache.Cache, _ *workload.Info, targets []*policy.Target,
	_ *schdcache.ClusterQueueSnapshot) (int, int, error) {
	return 0, len(targets), errors.New("policytest.Handle evicts nothing")
}

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
