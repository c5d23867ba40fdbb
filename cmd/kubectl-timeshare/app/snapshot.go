package app

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/resources"
	workloadfinish "sigs.k8s.io/kueue/pkg/workload/finish"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
)

// Snapshot is what what-if reads from the cluster.
type Snapshot struct {
	Now                     time.Time
	Flavors                 []kueue.ResourceFlavor
	Cohorts                 []unstructured.Unstructured
	ClusterQueues           []unstructured.Unstructured
	LocalQueues             []kueue.LocalQueue
	WorkloadPriorityClasses []kueue.WorkloadPriorityClass
	PriorityClasses         []schedulingv1.PriorityClass
	Workloads               []kueue.Workload
}

// Runtime sources, as the output names them.
const (
	RuntimeFromAnnotation = "expected-runtime annotation"
	RuntimeAssumed        = "--assume-runtime"
	RuntimeMedian         = "median of finished workloads"
)

// RuntimeChoice is the run time the simulation gives a workload, and where it comes from.
type RuntimeChoice struct {
	Runtime time.Duration
	Source  string
}

// readSnapshot lists what the simulation needs.
func readSnapshot(ctx context.Context, c client.Reader, now time.Time) (*Snapshot, error) {
	s := &Snapshot{Now: now}
	var rfs kueue.ResourceFlavorList
	var lqs kueue.LocalQueueList
	var wpcs kueue.WorkloadPriorityClassList
	var pcs schedulingv1.PriorityClassList
	var wls kueue.WorkloadList
	cohorts := &unstructured.UnstructuredList{}
	cohorts.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("CohortList"))
	cqs := &unstructured.UnstructuredList{}
	cqs.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueueList"))
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{
		{"resourceflavors", &rfs}, {"cohorts", cohorts}, {"clusterqueues", cqs}, {"localqueues", &lqs},
		{"workloadpriorityclasses", &wpcs}, {"priorityclasses", &pcs}, {"workloads", &wls},
	} {
		if err := c.List(ctx, l.list); err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	s.Flavors, s.Cohorts, s.ClusterQueues, s.LocalQueues = rfs.Items, cohorts.Items, cqs.Items, lqs.Items
	s.WorkloadPriorityClasses, s.PriorityClasses, s.Workloads = wpcs.Items, pcs.Items, wls.Items
	return s, nil
}

// runtimeFor chooses a workload's run time: its expected-runtime annotation, else assume, else
// the median; ok is false when none is known.
func runtimeFor(wl *kueue.Workload, assume, median time.Duration, finished int) (RuntimeChoice, bool) {
	if d, ok := plugins.Units().PromisedRuntime(wl); ok {
		return RuntimeChoice{Runtime: d, Source: RuntimeFromAnnotation}, true
	}
	if assume > 0 {
		return RuntimeChoice{Runtime: assume, Source: RuntimeAssumed}, true
	}
	if median > 0 {
		return RuntimeChoice{Runtime: median, Source: fmt.Sprintf("%s (%d)", RuntimeMedian, finished)}, true
	}
	return RuntimeChoice{}, false
}

// finishedMedian is the median of how long finished workloads held quota before they finished.
func finishedMedian(wls []kueue.Workload) (time.Duration, int) {
	var ds []time.Duration
	for i := range wls {
		wl := &wls[i]
		fin := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadFinished)
		qr := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
		if fin == nil || fin.Status != metav1.ConditionTrue || qr == nil || qr.Status != metav1.ConditionTrue {
			continue
		}
		if d := fin.LastTransitionTime.Sub(qr.LastTransitionTime.Time); d > 0 {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return 0, 0
	}
	slices.Sort(ds)
	return ds[(len(ds)-1)/2], len(ds)
}

// ScenarioOptions say how a snapshot becomes a scenario.
type ScenarioOptions struct {
	// For is how far ahead to simulate.
	For time.Duration
	// AssumeRuntime is the run time of workloads without an expected-runtime annotation.
	AssumeRuntime time.Duration
	Manager       ManagerSettings
}

// SnapshotScenario is a snapshot as a scenario, with what was chosen on the way.
type SnapshotScenario struct {
	Scenario *simulator.Scenario
	// Runtimes are the run times given, by namespace/name.
	Runtimes map[string]RuntimeChoice
	// Notes say what the scenario leaves out.
	Notes []string
}

const (
	tolerationPrefix = "preemption-toleration.scheduling.x-k8s.io/"
	ourPrefix        = "kueue-timeshare.io/"
)

// BuildScenario turns a snapshot into a scenario that starts at the snapshot's time, with the
// workloads holding quota then starting admitted since their reservation.
func BuildScenario(snap *Snapshot, o ScenarioOptions) (*SnapshotScenario, error) {
	start := snap.Now.UTC().Truncate(time.Second)
	sc := &simulator.Scenario{
		Name:        "cluster at " + start.Format(time.RFC3339),
		Description: "Saved by kubectl timeshare what-if: the cluster's queues and unfinished workloads, starting where they were.",
		Simulation:  simulator.Simulation{Start: &simulator.Time{Time: start}},
	}
	out := &SnapshotScenario{Scenario: sc, Runtimes: map[string]RuntimeChoice{}}
	if o.For > 0 {
		sc.Simulation.Until = &simulator.Duration{Duration: o.For}
	}
	if o.Manager.Known {
		c := o.Manager.Config
		sc.Timeshare = simulator.TimeshareOf(&c)
		sc.FairSharing = o.Manager.FairSharing
		for _, g := range simulator.ScenarioGates() {
			if on, set := o.Manager.FeatureGates[g]; set {
				if sc.FeatureGates == nil {
					sc.FeatureGates = map[string]bool{}
				}
				sc.FeatureGates[g] = on
			}
		}
	} else {
		out.Notes = append(out.Notes, "the manager's timeshare defaults are not known (pass --manager-config): the simulation uses the defaults of an empty timeshare section")
	}
	for _, rf := range sortedByName(snap.Flavors, func(rf kueue.ResourceFlavor) string { return rf.Name }) {
		sc.Flavors = append(sc.Flavors, &kueue.ResourceFlavor{TypeMeta: kueueMeta("ResourceFlavor"), ObjectMeta: metav1.ObjectMeta{Name: rf.Name}})
	}
	for _, u := range sortedByName(snap.Cohorts, func(u unstructured.Unstructured) string { return u.GetName() }) {
		sc.Cohorts = append(sc.Cohorts, specOnly(&u))
	}
	cqs := sets.New[string]()
	for _, u := range sortedByName(snap.ClusterQueues, func(u unstructured.Unstructured) string { return u.GetName() }) {
		for _, n := range simulator.Unsimulated(&u) {
			out.Notes = append(out.Notes, "ClusterQueue "+u.GetName()+": "+n)
		}
		cq := simulatedClusterQueue(&u)
		sc.ClusterQueues = append(sc.ClusterQueues, cq)
		cqs.Insert(cq.GetName())
	}
	lqs := map[string]string{} // namespace/name -> ClusterQueue
	for _, lq := range sortedByName(snap.LocalQueues, func(lq kueue.LocalQueue) string { return lq.Namespace + "/" + lq.Name }) {
		if !cqs.Has(string(lq.Spec.ClusterQueue)) {
			continue
		}
		sc.LocalQueues = append(sc.LocalQueues, &kueue.LocalQueue{TypeMeta: kueueMeta("LocalQueue"),
			ObjectMeta: metav1.ObjectMeta{Namespace: lq.Namespace, Name: lq.Name}, Spec: kueue.LocalQueueSpec{ClusterQueue: lq.Spec.ClusterQueue}})
		lqs[lq.Namespace+"/"+lq.Name] = string(lq.Spec.ClusterQueue)
	}
	for _, pc := range sortedByName(snap.WorkloadPriorityClasses, func(pc kueue.WorkloadPriorityClass) string { return pc.Name }) {
		sc.WorkloadPriorityClasses = append(sc.WorkloadPriorityClasses, &kueue.WorkloadPriorityClass{TypeMeta: kueueMeta("WorkloadPriorityClass"),
			ObjectMeta: metav1.ObjectMeta{Name: pc.Name, Annotations: withPrefix(pc.Annotations, tolerationPrefix)}, Value: pc.Value})
	}

	median, finished := finishedMedian(snap.Workloads)
	wls := slices.Clone(snap.Workloads)
	slices.SortStableFunc(wls, func(a, b kueue.Workload) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.UID, b.UID)
	})
	podClasses := sets.New[string]()
	var unknownRuntime []string
	for i := range wls {
		wl := &wls[i]
		key := wl.Namespace + "/" + wl.Name
		if workloadfinish.IsFinished(wl) || wl.DeletionTimestamp != nil {
			continue
		}
		if wl.Spec.Active != nil && !*wl.Spec.Active {
			out.Notes = append(out.Notes, fmt.Sprintf("workload %s is deactivated and left out", key))
			continue
		}
		if _, ok := lqs[wl.Namespace+"/"+string(wl.Spec.QueueName)]; !ok {
			out.Notes = append(out.Notes, fmt.Sprintf("workload %s is left out: its LocalQueue %q does not exist or points to no ClusterQueue", key, wl.Spec.QueueName))
			continue
		}
		rt, ok := runtimeFor(wl, o.AssumeRuntime, median, finished)
		if !ok {
			unknownRuntime = append(unknownRuntime, key)
			continue
		}
		w, notes := snapshotWorkload(wl, start, rt.Runtime)
		out.Notes = append(out.Notes, notes...)
		cqName := lqs[wl.Namespace+"/"+string(wl.Spec.QueueName)]
		covered := coveredResources(sc, cqName)
		for _, r := range sortedKeys(w.Resources) {
			if !covered.Has(r) {
				delete(w.Resources, r)
				delete(w.Snapshot.Flavors, r)
				out.Notes = append(out.Notes, fmt.Sprintf("workload %s asks for %s, which ClusterQueue %s has no quota for: simulated without it, as when the manager's resources.excludeResourcePrefixes leaves it out (otherwise Kueue never admits the workload)", key, r, cqName))
			}
		}
		if len(w.Resources) == 0 {
			out.Notes = append(out.Notes, fmt.Sprintf("workload %s is left out: it asks for nothing ClusterQueue %s has quota for", key, cqName))
			continue
		}
		if ref := wl.Spec.PriorityClassRef; ref != nil {
			if ref.Kind == kueue.PodPriorityClassKind {
				podClasses.Insert(ref.Name)
			}
			if !classExists(snap, ref) {
				w.PriorityClass = ""
				out.Notes = append(out.Notes, fmt.Sprintf("workload %s names %s %q, which is not in the cluster: simulated at priority 0", key, ref.Kind, ref.Name))
			}
		}
		sc.Workloads = append(sc.Workloads, w)
		out.Runtimes[key] = rt
	}
	if len(unknownRuntime) > 0 {
		return nil, fmt.Errorf("no run time is known for %s: no %s annotation, no --assume-runtime, and no finished workload in the cluster to take a median from; pass --assume-runtime",
			strings.Join(unknownRuntime, ", "), strings.Join(plugins.Units().Promisers(), " or "))
	}
	for _, pc := range sortedByName(snap.PriorityClasses, func(pc schedulingv1.PriorityClass) string { return pc.Name }) {
		if podClasses.Has(pc.Name) {
			sc.PriorityClasses = append(sc.PriorityClasses, &schedulingv1.PriorityClass{TypeMeta: metav1.TypeMeta{APIVersion: schedulingv1.SchemeGroupVersion.String(), Kind: "PriorityClass"},
				ObjectMeta: metav1.ObjectMeta{Name: pc.Name, Annotations: withPrefix(pc.Annotations, tolerationPrefix)}, Value: pc.Value})
		}
	}
	if len(sc.Workloads) == 0 {
		return nil, fmt.Errorf("nothing to simulate: no unfinished workload is queued in a LocalQueue of a ClusterQueue")
	}
	return out, nil
}

// snapshotWorkload is one workload of the cluster as a scenario workload starting where it is.
func snapshotWorkload(wl *kueue.Workload, start time.Time, runtime time.Duration) (simulator.Workload, []string) {
	key := wl.Namespace + "/" + wl.Name
	var notes []string
	w := simulator.Workload{
		Name: wl.Name, Namespace: wl.Namespace, Queue: string(wl.Spec.QueueName),
		Duration:    simulator.Duration{Duration: runtime},
		Annotations: withPrefix(wl.Annotations, ourPrefix),
		Snapshot:    &simulator.WorkloadSnapshot{Created: simulator.Duration{Duration: offset(wl.CreationTimestamp.Time, start)}},
	}
	for _, u := range plugins.Units() {
		nc, ok := u.Plugin.(notCarrier)
		if !ok {
			continue
		}
		note, drop := nc.NotCarried(w.Annotations)
		if note != "" {
			notes = append(notes, fmt.Sprintf("workload %s %s", key, note))
		}
		for _, a := range drop {
			delete(w.Annotations, a)
		}
	}
	if ref := wl.Spec.PriorityClassRef; ref != nil {
		w.PriorityClass = ref.Name
	} else if wl.Spec.Priority != nil && *wl.Spec.Priority != 0 {
		notes = append(notes, fmt.Sprintf("workload %s has priority %d without a priority class; it is simulated at priority 0", key, *wl.Spec.Priority))
	}
	w.Pods, w.Resources = podShape(wl)
	if len(wl.Spec.PodSets) > 1 {
		notes = append(notes, fmt.Sprintf("workload %s has %d pod sets; it is simulated as one pod asking for all of them", key, len(wl.Spec.PodSets)))
	}
	qr := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
	if qr != nil && qr.Status == metav1.ConditionTrue && wl.Status.Admission != nil {
		w.Snapshot.QuotaReserved = &simulator.Duration{Duration: max(offset(qr.LastTransitionTime.Time, start), w.Snapshot.Created.Duration)}
		flavors := map[string]string{}
		for _, psa := range wl.Status.Admission.PodSetAssignments {
			for r, f := range psa.Flavors {
				if _, asked := w.Resources[string(r)]; asked {
					flavors[string(r)] = string(f)
				}
			}
		}
		if len(flavors) > 0 {
			w.Snapshot.Flavors = flavors
		}
		return w, notes
	}
	if pc := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted); pc != nil && pc.Status == metav1.ConditionTrue {
		w.Snapshot.Preempted = &simulator.PastPreemption{At: simulator.Duration{Duration: offset(pc.LastTransitionTime.Time, start)}, Reason: pc.Reason}
	}
	return w, notes
}

// podShape is a workload's pods and what each asks for: its pod set's, or, with several pod sets,
// one pod asking for all of them.
func podShape(wl *kueue.Workload) (int32, map[string]simulator.Quantity) {
	if len(wl.Spec.PodSets) == 1 {
		ps := wl.Spec.PodSets[0]
		return max(ps.Count, 1), quantities(resources.NewMapRequestsFromPodSpec(&ps.Template.Spec).ToResourceList(nil))
	}
	total := corev1.ResourceList{}
	for _, ps := range wl.Spec.PodSets {
		for r, q := range resources.NewMapRequestsFromPodSpec(&ps.Template.Spec).ToResourceList(nil) {
			q.Mul(int64(ps.Count))
			sum := total[r]
			sum.Add(q)
			total[r] = sum
		}
	}
	return 1, quantities(total)
}

func quantities(rl corev1.ResourceList) map[string]simulator.Quantity {
	out := map[string]simulator.Quantity{}
	for r, q := range rl {
		if q.Sign() > 0 {
			out[string(r)] = simulator.Quantity{Quantity: q}
		}
	}
	return out
}

// offset is t from start, to the second (condition times have seconds only), at most zero.
func offset(t, start time.Time) time.Duration {
	return min(t.Sub(start).Round(time.Second), 0)
}

func withPrefix(m map[string]string, prefix string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

func sortedByName[T any](items []T, name func(T) string) []T {
	out := slices.Clone(items)
	slices.SortStableFunc(out, func(a, b T) int { return strings.Compare(name(a), name(b)) })
	return out
}

// coveredResources are the resources a ClusterQueue of the scenario has quota for.
func coveredResources(sc *simulator.Scenario, cq string) sets.Set[string] {
	out := sets.New[string]()
	for _, c := range sc.ClusterQueues {
		if c.GetName() == cq {
			groups, _, _ := unstructured.NestedSlice(c.Object, "spec", "resourceGroups")
			for _, g := range groups {
				covered, _, _ := unstructured.NestedStringSlice(g.(map[string]any), "coveredResources")
				out.Insert(covered...)
			}
		}
	}
	return out
}

// simulatedClusterQueue is a ClusterQueue without what the simulator does not model (see
// simulator.Unsimulated): the schema's defaults stand for it.
func simulatedClusterQueue(u *unstructured.Unstructured) *unstructured.Unstructured {
	cq := specOnly(u)
	for _, f := range []string{"admissionChecks", "admissionChecksStrategy", "admissionScope", "stopPolicy", "namespaceSelector", "flavorFungibility"} {
		unstructured.RemoveNestedField(cq.Object, "spec", f)
	}
	return cq
}

func kueueMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: kind}
}

// specOnly is an object as applied: its kind, name and spec.
func specOnly(u *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{"spec": runtime.DeepCopyJSONValue(u.Object["spec"])}}
	if out.Object["spec"] == nil {
		out.Object["spec"] = map[string]any{}
	}
	out.SetGroupVersionKind(u.GroupVersionKind())
	out.SetName(u.GetName())
	return out
}

func classExists(snap *Snapshot, ref *kueue.PriorityClassRef) bool {
	if ref.Kind == kueue.PodPriorityClassKind {
		return slices.ContainsFunc(snap.PriorityClasses, func(pc schedulingv1.PriorityClass) bool { return pc.Name == ref.Name })
	}
	return slices.ContainsFunc(snap.WorkloadPriorityClasses, func(pc kueue.WorkloadPriorityClass) bool { return pc.Name == ref.Name })
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// notCarrier is a feature's plugin (policy.Unit.Plugin) that keeps some of a workload's
// annotations out of a simulation from a snapshot: the annotations to drop, and a note for the
// user ("": none).
type notCarrier interface {
	NotCarried(ann map[string]string) (note string, drop []string)
}
