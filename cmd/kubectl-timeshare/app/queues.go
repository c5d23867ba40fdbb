package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/component-base/featuregate"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	visibilityapi "sigs.k8s.io/kueue/apis/visibility/v1beta2"
	visibilityclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/cohorttree"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/toleration"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
)

// QueuesReport is what `queues` shows.
type QueuesReport struct {
	// Manager says what is known of the manager's timeshare settings.
	Manager       string               `json:"manager"`
	ClusterQueues []ClusterQueueReport `json:"clusterQueues"`
}

// ClusterQueueReport is one ClusterQueue: its settings in force, who holds quota, who waits.
type ClusterQueueReport struct {
	Name   string `json:"name"`
	Cohort string `json:"cohort,omitempty"`
	// Problem is set when the manager ignores the ClusterQueue's or a Cohort's settings.
	Problem  string             `json:"problem,omitempty"`
	Settings []SettingReport    `json:"settings"`
	Admitted []AdmittedWorkload `json:"admitted"`
	Pending  []PendingWorkload  `json:"pending"`
	// PendingOrder says where the order of Pending comes from.
	PendingOrder string `json:"pendingOrder"`
}

// SettingReport is one setting in force and where its value comes from.
type SettingReport struct {
	Name string `json:"name"`
	// Value is empty when nothing is in force (or not known).
	Value  string `json:"value,omitempty"`
	Source string `json:"source"`
	// Against lists the reclaiming ClusterQueues a reclaimMinRuntime applies to, when it depends
	// on the reclaimer.
	Against []string `json:"against,omitempty"`
}

// AdmittedWorkload is a workload holding quota in the ClusterQueue.
type AdmittedWorkload struct {
	Namespace      string       `json:"namespace"`
	Name           string       `json:"name"`
	Priority       int32        `json:"priority"`
	LocalQueue     string       `json:"localQueue,omitempty"`
	QuotaReserved  *metav1.Time `json:"quotaReserved,omitempty"`
	Admitted       *metav1.Time `json:"admitted,omitempty"`
	Evicting       bool         `json:"evicting,omitempty"`
	Protections    []Protection `json:"protections,omitempty"`
	TurnEnds       *metav1.Time `json:"turnEnds,omitempty"`
	TurnSetting    string       `json:"turnSetting,omitempty"`
	RunningCounted string       `json:"runningCountedFrom,omitempty"`
	// Features are the units' columns (policy.Column), by feature gate.
	Features map[string]FeatureCell `json:"features,omitempty"`
	// Details are what the plugin's feature files say of it (holdingDetails), by feature gate.
	Details map[string]any `json:"details,omitempty"`
}

// FeatureCell is a unit's value for a workload and the instant it leads to.
type FeatureCell struct {
	Value string       `json:"value"`
	From  *metav1.Time `json:"from,omitempty"`
}

// Protection is one min-runtime or toleration protecting (or having protected) a workload.
type Protection struct {
	// Kind is preempt (a min-runtime, from its own ClusterQueue), reclaim (a min-runtime, from
	// another one) or toleration (from preemptors below a priority).
	Kind  string       `json:"kind"`
	Until *metav1.Time `json:"until,omitempty"`
	// Forever is set for a toleration that lasts for as long as the workload runs.
	Forever bool   `json:"forever,omitempty"`
	Active  bool   `json:"active"`
	Source  string `json:"source"`
	// Against lists the reclaiming ClusterQueues a reclaim protection applies to.
	Against []string `json:"against,omitempty"`
}

// PendingWorkload is a workload waiting for quota, with the manager's explanation.
type PendingWorkload struct {
	Position   int          `json:"position"`
	Namespace  string       `json:"namespace"`
	Name       string       `json:"name"`
	Priority   int32        `json:"priority"`
	LocalQueue string       `json:"localQueue,omitempty"`
	Created    *metav1.Time `json:"created,omitempty"`
	// Reason and Message are the QuotaReserved condition's, written by the manager.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// ETA is the manager's admission estimate, from the visibility API's annotations: an RFC 3339
	// time or "unknown"; Estimate is its sentence or reason.
	ETA      string `json:"eta,omitempty"`
	Estimate string `json:"estimate,omitempty"`
}

// details is what the views' detail of says of wl, by gate; nil when nothing.
func details(wl *kueue.Workload, of func(view) detail) map[string]any {
	var out map[string]any
	for _, view := range views() {
		d := of(view)
		if d == nil {
			continue
		}
		if gate, v, ok := d(wl); ok {
			if out == nil {
				out = map[string]any{}
			}
			out[gate] = v
		}
	}
	return out
}

const (
	orderVisibility = "the scheduler's order, from the visibility API"
	unknownDefault  = "manager default, not known here (pass --manager-config)"
)

func (e *env) queues(ctx context.Context, only string) (*QueuesReport, error) {
	cqs := &unstructured.UnstructuredList{}
	cqs.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueueList"))
	if only != "" {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueue"))
		if err := e.client.Get(ctx, client.ObjectKey{Name: only}, u); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("ClusterQueue %q not found", only)
			}
			return nil, fmt.Errorf("reading ClusterQueue %q: %w", only, err)
		}
	}
	if err := e.client.List(ctx, cqs); err != nil {
		return nil, fmt.Errorf("listing ClusterQueues: %w", err)
	}
	cohorts := &unstructured.UnstructuredList{}
	cohorts.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("CohortList"))
	if err := e.client.List(ctx, cohorts); err != nil {
		return nil, fmt.Errorf("listing Cohorts: %w", err)
	}
	var wls kueue.WorkloadList
	if err := e.client.List(ctx, &wls); err != nil {
		return nil, fmt.Errorf("listing Workloads: %w", err)
	}
	var lqs kueue.LocalQueueList
	if err := e.client.List(ctx, &lqs); err != nil {
		return nil, fmt.Errorf("listing LocalQueues: %w", err)
	}
	vis, err := visibilityclient.NewForConfig(e.visibility)
	if err != nil {
		return nil, err
	}
	pending := func(cq string) ([]PendingWorkload, string) {
		s, err := vis.VisibilityV1beta2().ClusterQueues().GetPendingWorkloadsSummary(ctx, cq, metav1.GetOptions{})
		if err != nil {
			return nil, err.Error()
		}
		return pendingFromVisibility(s.Items), ""
	}
	var wpcs kueue.WorkloadPriorityClassList
	if err := e.client.List(ctx, &wpcs); err != nil {
		return nil, fmt.Errorf("listing WorkloadPriorityClasses: %w", err)
	}
	var pcs schedulingv1.PriorityClassList
	if err := e.client.List(ctx, &pcs); err != nil {
		return nil, fmt.Errorf("listing PriorityClasses: %w", err)
	}
	return BuildQueuesReport(Cluster{ClusterQueues: cqs.Items, Cohorts: cohorts.Items, Workloads: wls.Items, LocalQueues: lqs.Items,
		WorkloadPriorityClasses: wpcs.Items, PriorityClasses: pcs.Items}, only, e.manager, pending, e.now), nil
}

// Cluster is what `queues` reads from the API.
type Cluster struct {
	ClusterQueues []unstructured.Unstructured
	Cohorts       []unstructured.Unstructured
	Workloads     []kueue.Workload
	LocalQueues   []kueue.LocalQueue
	// The priority classes declare preemption tolerations.
	WorkloadPriorityClasses []kueue.WorkloadPriorityClass
	PriorityClasses         []schedulingv1.PriorityClass
}

// PendingFunc returns a ClusterQueue's pending workloads in the scheduler's order from the
// visibility API, or why it could not.
type PendingFunc func(cq string) ([]PendingWorkload, string)

// BuildQueuesReport resolves each ClusterQueue's settings with the manager's store and policy
// functions and lays out its workloads.
//
// only, when set, limits the report to one ClusterQueue; the others are still read, since a
// reclaim protection depends on who reclaims.
func BuildQueuesReport(c Cluster, only string, m ManagerSettings, pending PendingFunc, now time.Time) *QueuesReport {
	clock := policy.RuntimeClockAdmitted
	rep := &QueuesReport{Manager: "timeshare defaults not known (no --manager-config); runtimeClock assumed Admitted", ClusterQueues: []ClusterQueueReport{}}
	if m.Known {
		clock = policy.RuntimeClock(m.Config.RuntimeClock)
		rep.Manager = fmt.Sprintf("from --manager-config: %s, runtimeClock %s", minRuntimeDefaults(m), clock)
	}
	store := queuesettings.NewStore()
	if m.Known {
		store.Configure(&m.Config)
	}
	// Tolerations as the manager's store reads them; a class with invalid annotations has none,
	// as in the manager.
	tolerations := toleration.NewStore()
	for _, pc := range c.WorkloadPriorityClasses {
		_ = tolerations.Set(kueue.WorkloadPriorityClassKind, pc.Name, pc.Annotations, pc.Value)
	}
	for _, pc := range c.PriorityClasses {
		_ = tolerations.Set(kueue.PodPriorityClassKind, pc.Name, pc.Annotations, pc.Value)
	}
	// Each feature reads its facts as the manager does, unless its gate is off.
	units, sources := plugins.Units(), policy.Sources{tolerations}
	on := func(f policy.Feature) bool { return !m.gateOff(string(f)) }
	problems := map[string]string{}
	parents := map[string]string{}
	for i := range c.Cohorts {
		u := &c.Cohorts[i]
		if err := store.SetCohort(u); err != nil {
			problems["Cohort "+u.GetName()] = err.Error()
		}
		parents[u.GetName()], _, _ = unstructured.NestedString(u.Object, "spec", "parentName")
	}
	lqToCQ := map[string]string{}
	for _, lq := range c.LocalQueues {
		lqToCQ[lq.Namespace+"/"+lq.Name] = string(lq.Spec.ClusterQueue)
	}
	byKey := map[string]*kueue.Workload{}
	for i := range c.Workloads {
		byKey[c.Workloads[i].Namespace+"/"+c.Workloads[i].Name] = &c.Workloads[i]
	}
	cqs := slices.Clone(c.ClusterQueues)
	slices.SortFunc(cqs, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	// Every ClusterQueue's path up its tree first: a reclaim is resolved between two of them.
	var paths minRuntimePaths
	cqProblems := map[string]string{}
	for i := range cqs {
		u := &cqs[i]
		name := u.GetName()
		if err := store.SetClusterQueue(u); err != nil {
			cqProblems[name] = fmt.Sprintf("the manager ignores this ClusterQueue's kueue-timeshare settings: %v", err)
		}
		cohort, _, _ := unstructured.NestedString(u.Object, "spec", "cohortName")
		up, _ := cohorttree.Walk(kueue.CohortReference(cohort), func(c kueue.CohortReference) (kueue.CohortReference, error) {
			return kueue.CohortReference(parents[string(c)]), nil
		})
		for _, p := range up {
			if msg, ok := problems["Cohort "+string(p)]; ok && cqProblems[name] == "" {
				cqProblems[name] = fmt.Sprintf("the manager ignores Cohort %s's kueue-timeshare settings: %s", p, msg)
			}
		}
		paths.add(store, name, up)
	}
	for i := range cqs {
		u := &cqs[i]
		name := u.GetName()
		if only != "" && name != only {
			continue
		}
		r := ClusterQueueReport{Name: name, Admitted: []AdmittedWorkload{}, Pending: []PendingWorkload{}, Problem: cqProblems[name]}
		r.Cohort, _, _ = unstructured.NestedString(u.Object, "spec", "cohortName")
		cqRef := kueue.ClusterQueueReference(name)
		window := windowOf(store, cqRef)
		r.Settings = []SettingReport{windowSetting(name, window)}
		if window > 0 && m.gateOff(string(features.TimeBasedSamePriorityPreemption)) {
			r.Settings[0] = SettingReport{Name: "minAdmitDuration", Source: fmt.Sprintf("ClusterQueue %s sets %s, ignored: %s", name, window, gateOffNote(features.TimeBasedSamePriorityPreemption))}
			window = 0
		}
		var protections []protection
		if m.gateOff(string(features.MinRuntimeProtection)) {
			for _, f := range []string{"preemptMinRuntime", "reclaimMinRuntime"} {
				r.Settings = append(r.Settings, SettingReport{Name: f, Source: "ignored: " + gateOffNote(features.MinRuntimeProtection)})
			}
		} else {
			var rows []SettingReport
			rows, protections = paths.protections(name, m.Known)
			r.Settings = append(r.Settings, rows...)
		}
		parents := paths.parents(name)
		for _, v := range views() {
			if v.settingRows != nil {
				r.Settings = append(r.Settings, v.settingRows(store, cqRef, parents, m)...)
			}
		}

		for i := range c.Workloads {
			wl := &c.Workloads[i]
			if wl.Status.Admission == nil || string(wl.Status.Admission.ClusterQueue) != name ||
				!apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
				apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
				continue
			}
			cand := policy.CandidateOf(wl, clock)
			a := admitted(wl, &cand, window, clock, protections, m.Known, now)
			units.ReadFacts(&cand, wl, sources, on, false)
			for _, sh := range shieldsOf(&cand, now, on) {
				pr := Protection{Kind: sh.Kind, Active: sh.Active, Forever: sh.Forever, Source: sh.Source}
				if !sh.Until.IsZero() && !sh.Forever {
					pr.Until = ptrTime(metav1.NewTime(sh.Until))
				}
				a.Protections = append(a.Protections, pr)
			}
			a.Features = cells(&cand, on)
			a.Details = details(wl, func(v view) detail { return v.holdingDetail })
			r.Admitted = append(r.Admitted, a)
		}
		slices.SortFunc(r.Admitted, func(a, b AdmittedWorkload) int {
			return cmpTimes(a.QuotaReserved, b.QuotaReserved, a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})

		list, why := pending(name)
		if why == "" {
			r.PendingOrder = orderVisibility
		} else {
			r.PendingOrder = "creation order, not necessarily the scheduler's: the visibility API could not be read (" + why + ")"
			list = waiting(c.Workloads, lqToCQ, name)
		}
		for _, p := range list {
			if wl := byKey[p.Namespace+"/"+p.Name]; wl != nil {
				p.Created = ptrTime(wl.CreationTimestamp)
				if cond := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); cond != nil {
					p.Reason, p.Message = cond.Reason, cond.Message
				}
			}
			r.Pending = append(r.Pending, p)
		}
		rep.ClusterQueues = append(rep.ClusterQueues, r)
	}
	return rep
}

func gateOffNote(gate featuregate.Feature) string {
	return fmt.Sprintf("feature gate %s is off in --manager-config", gate)
}

func admitted(wl *kueue.Workload, c *policy.Candidate, window time.Duration, clock policy.RuntimeClock, protections []protection, known bool, now time.Time) AdmittedWorkload {
	a := AdmittedWorkload{Namespace: wl.Namespace, Name: wl.Name, Priority: priorityOf(wl), LocalQueue: string(wl.Spec.QueueName), Evicting: c.Evicted}
	if !c.QuotaReservedAt.IsZero() {
		a.QuotaReserved = ptrTime(metav1.NewTime(c.QuotaReservedAt))
	}
	turnEnds(&a, c, window)
	if c.Admitted {
		a.Admitted = ptrTime(metav1.NewTime(c.AdmittedAt))
		a.RunningCounted = string(clock)
	}
	a.Protections = append(a.Protections, protectionRows(c, protections, known, now)...)
	return a
}

// cells are the columns of the features that are on for c.
func cells(c *policy.Candidate, on func(policy.Feature) bool) map[string]FeatureCell {
	var out map[string]FeatureCell
	for _, col := range featureColumns() {
		if !on(col.feature) {
			continue
		}
		if v, at := col.Cell(c); v != "" {
			if out == nil {
				out = map[string]FeatureCell{}
			}
			out[string(col.feature)] = FeatureCell{Value: v, From: ptrTime(metav1.NewTime(at))}
		}
	}
	return out
}

// waiting lists cq's active workloads that hold no quota and have not finished, by creation time.
func waiting(wls []kueue.Workload, lqToCQ map[string]string, cq string) []PendingWorkload {
	var ws []*kueue.Workload
	for i := range wls {
		wl := &wls[i]
		if lqToCQ[wl.Namespace+"/"+string(wl.Spec.QueueName)] != cq || (wl.Spec.Active != nil && !*wl.Spec.Active) ||
			apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) ||
			apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadFinished) {
			continue
		}
		ws = append(ws, wl)
	}
	slices.SortFunc(ws, func(a, b *kueue.Workload) int {
		return cmpTimes(&a.CreationTimestamp, &b.CreationTimestamp, a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	out := make([]PendingWorkload, 0, len(ws))
	for i, wl := range ws {
		out = append(out, PendingWorkload{Position: i, Namespace: wl.Namespace, Name: wl.Name, Priority: priorityOf(wl), LocalQueue: string(wl.Spec.QueueName)})
	}
	return out
}

func priorityOf(wl *kueue.Workload) int32 {
	if wl.Spec.Priority != nil {
		return *wl.Spec.Priority
	}
	return 0
}

func ptrTime(t metav1.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func cmpTimes(a, b *metav1.Time, ka, kb string) int {
	var ta, tb time.Time
	if a != nil {
		ta = a.Time
	}
	if b != nil {
		tb = b.Time
	}
	if c := ta.Compare(tb); c != 0 {
		return c
	}
	return strings.Compare(ka, kb)
}

// pendingFromVisibility reads the visibility API's list, with the estimate its annotations carry.
func pendingFromVisibility(items []visibilityapi.PendingWorkload) []PendingWorkload {
	var out []PendingWorkload
	for _, p := range items {
		out = append(out, PendingWorkload{Position: int(p.PositionInClusterQueue), Namespace: p.Namespace, Name: p.Name,
			Priority: p.Priority, LocalQueue: string(p.LocalQueueName),
			ETA: p.Annotations[annotations.EstimatedAdmission], Estimate: p.Annotations[annotations.AdmissionEstimate]})
	}
	return out
}
