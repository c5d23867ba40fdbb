package app

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityapi "sigs.k8s.io/kueue/apis/visibility/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// ExplainReport is what `explain workload` shows.
type ExplainReport struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	ClusterQueue string `json:"clusterQueue,omitempty"`
	LocalQueue   string `json:"localQueue,omitempty"`
	Priority     int32  `json:"priority"`
	// State is one line: holding quota, waiting, finished.
	State string `json:"state"`
	// Wait is why it waits now, LastPreemption the rule behind its last preemption, both in the
	// manager's words.
	Wait           *Decision     `json:"wait,omitempty"`
	LastPreemption *Decision     `json:"lastPreemption,omitempty"`
	History        []HistoryItem `json:"history"`
	// Evictions counts evictions by reason (the Workload's schedulingStats), and Requeues its
	// requeue state.
	Evictions []EvictionCount `json:"evictions,omitempty"`
	Requeues  *RequeueState   `json:"requeues,omitempty"`
	// Details are what the plugin's feature files say of it (explainDetails, waitingDetails), by
	// feature gate.
	Details map[string]any `json:"details,omitempty"`
	// ETA and Estimate are a waiting workload's admission estimate as `queues` shows it, from its
	// LocalQueue's pending workloads in the visibility API; empty when that gives none.
	ETA      string `json:"eta,omitempty"`
	Estimate string `json:"estimate,omitempty"`
}

// Decision is a condition written by the manager that explains the workload's state.
type Decision struct {
	Condition string       `json:"condition"`
	Status    string       `json:"status"`
	Reason    string       `json:"reason"`
	Message   string       `json:"message"`
	Since     *metav1.Time `json:"since,omitempty"`
}

// HistoryItem is one condition transition or event.
type HistoryItem struct {
	Time *metav1.Time `json:"time,omitempty"`
	// Source is "condition" or "event".
	Source string `json:"source"`
	// What is the condition type and status, or the event's type.
	What    string `json:"what"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	Count   int32  `json:"count,omitempty"`
}

// EvictionCount is one of the Workload's schedulingStats.evictions.
type EvictionCount struct {
	Reason          string `json:"reason"`
	UnderlyingCause string `json:"underlyingCause,omitempty"`
	Count           int32  `json:"count"`
}

// RequeueState is the Workload's status.requeueState.
type RequeueState struct {
	Count     int32        `json:"count"`
	RequeueAt *metav1.Time `json:"requeueAt,omitempty"`
}

func (e *env) explainWorkload(ctx context.Context, ns, name string) (*ExplainReport, error) {
	var wl kueue.Workload
	if err := e.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &wl); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("Workload %q not found in namespace %q", name, ns)
		}
		return nil, fmt.Errorf("reading Workload %s/%s: %w", ns, name, err)
	}
	var evs eventsv1.EventList
	if err := e.client.List(ctx, &evs, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{
		"regarding.name": name, "regarding.kind": "Workload"})}); err != nil {
		return nil, fmt.Errorf("listing events of Workload %s/%s: %w", ns, name, err)
	}
	var core corev1.EventList
	if err := e.client.List(ctx, &core, client.InNamespace(ns), client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "involvedObject.kind": "Workload"})}); err != nil {
		return nil, fmt.Errorf("listing events of Workload %s/%s: %w", ns, name, err)
	}
	r := BuildExplainReport(&wl, evs.Items, core.Items)
	if r.Wait != nil {
		for _, v := range views() {
			if v.waitingDetail != nil {
				v.waitingDetail(ctx, e.client, &wl, r)
			}
		}
	}
	if r.ClusterQueue == "" && r.LocalQueue != "" {
		// Not admitted: the ClusterQueue it waits in is its LocalQueue's.
		var lq kueue.LocalQueue
		if err := e.client.Get(ctx, types.NamespacedName{Namespace: ns, Name: r.LocalQueue}, &lq); err == nil {
			r.ClusterQueue = string(lq.Spec.ClusterQueue)
		}
	}
	if r.State == stateWaiting && r.LocalQueue != "" {
		// Without the visibility API (or an estimate in it) the report simply has none.
		if vis, err := visibilityclient.NewForConfig(e.visibility); err == nil {
			if s, err := vis.VisibilityV1beta2().LocalQueues(ns).GetPendingWorkloadsSummary(ctx, r.LocalQueue, metav1.GetOptions{}); err == nil {
				r.ETA, r.Estimate = estimateOf(s.Items, ns, name)
			}
		}
	}
	return r, nil
}

// estimateOf is the estimate the visibility API's items carry for the workload ns/name.
func estimateOf(items []visibilityapi.PendingWorkload, ns, name string) (eta, estimate string) {
	for _, p := range pendingFromVisibility(items) {
		if p.Namespace == ns && p.Name == name {
			return p.ETA, p.Estimate
		}
	}
	return "", ""
}

// BuildExplainReport lays out a Workload's conditions and events (both APIs, each event once)
// and picks the condition that explains its state.
func BuildExplainReport(wl *kueue.Workload, evs []eventsv1.Event, core []corev1.Event) *ExplainReport {
	r := &ExplainReport{Namespace: wl.Namespace, Name: wl.Name, LocalQueue: string(wl.Spec.QueueName), Priority: priorityOf(wl), History: []HistoryItem{}}
	if wl.Status.Admission != nil {
		r.ClusterQueue = string(wl.Status.Admission.ClusterQueue)
	}
	conds := wl.Status.Conditions
	for _, c := range conds {
		r.History = append(r.History, HistoryItem{Time: ptrTime(c.LastTransitionTime), Source: "condition",
			What: c.Type + "=" + string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	seen := map[types.UID]bool{}
	for _, ev := range evs {
		if ev.UID != "" && seen[ev.UID] {
			continue
		}
		seen[ev.UID] = true
		t := ev.EventTime.Time
		if ev.Series != nil {
			t = ev.Series.LastObservedTime.Time
		} else if t.IsZero() {
			t = ev.DeprecatedLastTimestamp.Time
		}
		var count int32
		if ev.Series != nil {
			count = ev.Series.Count
		} else if ev.DeprecatedCount > 1 {
			count = ev.DeprecatedCount
		}
		r.History = append(r.History, HistoryItem{Time: ptrTime(metav1.NewTime(t)), Source: "event", What: ev.Type, Reason: ev.Reason, Message: ev.Note, Count: count})
	}
	for _, ev := range core {
		if ev.UID != "" && seen[ev.UID] {
			continue
		}
		seen[ev.UID] = true
		t := ev.LastTimestamp.Time
		if t.IsZero() {
			t = ev.EventTime.Time
		}
		var count int32
		if ev.Count > 1 {
			count = ev.Count
		}
		r.History = append(r.History, HistoryItem{Time: ptrTime(metav1.NewTime(t)), Source: "event", What: ev.Type, Reason: ev.Reason, Message: ev.Message, Count: count})
	}
	slices.SortStableFunc(r.History, func(a, b HistoryItem) int {
		return cmpTimes(a.Time, b.Time, a.Source+a.What+a.Reason, b.Source+b.What+b.Reason)
	})
	if s := wl.Status.SchedulingStats; s != nil {
		for _, ev := range s.Evictions {
			r.Evictions = append(r.Evictions, EvictionCount{Reason: ev.Reason, UnderlyingCause: string(ev.UnderlyingCause), Count: ev.Count})
		}
	}
	if rs := wl.Status.RequeueState; rs != nil {
		r.Requeues = &RequeueState{RequeueAt: rs.RequeueAt}
		if rs.Count != nil {
			r.Requeues.Count = *rs.Count
		}
	}

	r.Details = details(wl, func(v view) detail { return v.explainDetail })

	reserved := apimeta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved)
	switch {
	case apimeta.IsStatusConditionTrue(conds, kueue.WorkloadFinished):
		r.State = "finished"
	case reserved != nil && reserved.Status == metav1.ConditionTrue:
		r.State = "holding quota in ClusterQueue " + r.ClusterQueue
		if apimeta.IsStatusConditionTrue(conds, kueue.WorkloadEvicted) {
			r.State += ", being evicted"
		} else {
			for _, v := range views() {
				if v.holdingNote == nil {
					continue
				}
				if s := v.holdingNote(r); s != "" {
					r.State += ", " + s
				}
			}
		}
	case wl.Spec.Active != nil && !*wl.Spec.Active:
		r.State = "deactivated"
	default:
		r.State = stateWaiting
		if reserved != nil && reserved.Message != "" {
			r.Wait = decision(reserved)
		}
	}
	r.LastPreemption = lastPreemption(conds, r.History)
	return r
}

func decision(c *metav1.Condition) *Decision {
	return &Decision{Condition: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message, Since: ptrTime(c.LastTransitionTime)}
}

// lastPreemption is the Preempted condition while it is true. Once the workload holds quota again
// Kueue sets it to False with reason QuotaReserved and "Previously: <message>": the preemption
// reason then comes from the last EvictedDueTo<reason> event, if it is still kept.
func lastPreemption(conds []metav1.Condition, history []HistoryItem) *Decision {
	c := apimeta.FindStatusCondition(conds, kueue.WorkloadPreempted)
	if c == nil {
		return nil
	}
	d := decision(c)
	if c.Status == metav1.ConditionTrue {
		return d
	}
	if !strings.HasPrefix(c.Message, previously) {
		return nil
	}
	d.Message = strings.TrimPrefix(c.Message, previously)
	d.Reason = ""
	for _, h := range slices.Backward(history) {
		if h.Source == "event" && strings.HasPrefix(h.Reason, evictedDueTo) {
			d.Reason = strings.TrimPrefix(h.Reason, evictedDueTo)
			break
		}
	}
	return d
}

const (
	stateWaiting = "waiting for quota"
	previously   = "Previously: "
	evictedDueTo = "EvictedDueTo"
)
