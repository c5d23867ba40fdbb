package simulator

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// PodSetName is the name of the one pod set of every simulated workload.
const PodSetName = "main"

// Objects are the API objects a scenario stands for: what the simulator loads into its in-process
// cluster, and what a test creates on a real API server to run the same scenario under the manager.
type Objects struct {
	Namespaces []*corev1.Namespace
	Flavors    []*kueue.ResourceFlavor
	// Cohorts and ClusterQueues are raw objects: they carry kueue-timeshare's fields, which Kueue's
	// typed objects drop. Kueue's schema defaults are written out, as the API server would add them.
	Cohorts                 []*unstructured.Unstructured
	ClusterQueues           []*unstructured.Unstructured
	LocalQueues             []*kueue.LocalQueue
	WorkloadPriorityClasses []*kueue.WorkloadPriorityClass
	PriorityClasses         []*schedulingv1.PriorityClass
}

// Objects builds the scenario's API objects.
func (s *Scenario) Objects() (*Objects, error) {
	o := &Objects{}
	namespaces := []string{}
	for _, lq := range s.localQueues() {
		if !slices.Contains(namespaces, lq.namespace()) {
			namespaces = append(namespaces, lq.namespace())
		}
		o.LocalQueues = append(o.LocalQueues, &kueue.LocalQueue{
			TypeMeta:   metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "LocalQueue"},
			ObjectMeta: metav1.ObjectMeta{Namespace: lq.namespace(), Name: lq.Name},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(lq.ClusterQueue)},
		})
	}
	// A workload naming a ClusterQueue without a LocalQueue gets one, as expand assumes.
	for _, w := range s.Workloads {
		if w.ClusterQueue == "" {
			continue
		}
		if _, ok := s.localQueueFor(w.ClusterQueue); ok || hasLocalQueue(o.LocalQueues, DefaultNamespace, w.ClusterQueue) {
			continue
		}
		if !slices.Contains(namespaces, DefaultNamespace) {
			namespaces = append(namespaces, DefaultNamespace)
		}
		o.LocalQueues = append(o.LocalQueues, &kueue.LocalQueue{
			TypeMeta:   metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "LocalQueue"},
			ObjectMeta: metav1.ObjectMeta{Namespace: DefaultNamespace, Name: w.ClusterQueue},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(w.ClusterQueue)},
		})
	}
	for _, ns := range namespaces {
		o.Namespaces = append(o.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	for _, f := range s.Flavors {
		o.Flavors = append(o.Flavors, &kueue.ResourceFlavor{
			TypeMeta:   metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "ResourceFlavor"},
			ObjectMeta: metav1.ObjectMeta{Name: f.Name},
		})
	}
	for _, c := range s.Cohorts {
		o.Cohorts = append(o.Cohorts, cohortObject(c))
	}
	for _, cq := range s.ClusterQueues {
		o.ClusterQueues = append(o.ClusterQueues, clusterQueueObject(cq))
	}
	for _, pc := range s.PriorityClasses {
		meta := metav1.ObjectMeta{Name: pc.Name, Annotations: pc.Annotations}
		if pc.kind() == kueue.PodPriorityClassKind {
			o.PriorityClasses = append(o.PriorityClasses, &schedulingv1.PriorityClass{
				TypeMeta: metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"}, ObjectMeta: meta, Value: pc.Value})
			continue
		}
		o.WorkloadPriorityClasses = append(o.WorkloadPriorityClasses, &kueue.WorkloadPriorityClass{
			TypeMeta: metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "WorkloadPriorityClass"}, ObjectMeta: meta, Value: pc.Value})
	}
	return o, nil
}

func hasLocalQueue(lqs []*kueue.LocalQueue, ns, name string) bool {
	return slices.ContainsFunc(lqs, func(lq *kueue.LocalQueue) bool { return lq.Namespace == ns && lq.Name == name })
}

func newRaw(kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind(kind))
	u.SetName(name)
	return u
}

func cohortObject(c Cohort) *unstructured.Unstructured {
	spec := map[string]any{}
	if c.Parent != "" {
		spec["parentName"] = c.Parent
	}
	if len(c.Quota) > 0 {
		spec["resourceGroups"] = resourceGroups(c.Quota)
	}
	if c.Preemption != nil {
		pr := map[string]any{}
		setDuration(pr, "preemptMinRuntime", c.Preemption.PreemptMinRuntime)
		setDuration(pr, "reclaimMinRuntime", c.Preemption.ReclaimMinRuntime)
		setNotice(pr, c.Preemption.NoticePeriod, c.Preemption.NoticeOnPriorityPreemption, c.Preemption.NoticeOnReclaim)
		spec["preemption"] = pr
	}
	if c.FairSharing != nil && c.FairSharing.Weight != nil {
		spec["fairSharing"] = map[string]any{"weight": c.FairSharing.Weight.String()}
	}
	return newRaw("Cohort", c.Name, spec)
}

func clusterQueueObject(cq ClusterQueue) *unstructured.Unstructured {
	strategy := cq.QueueingStrategy
	if strategy == "" {
		strategy = string(kueue.BestEffortFIFO)
	}
	preemption := map[string]any{
		"withinClusterQueue":  string(kueue.PreemptionPolicyNever),
		"reclaimWithinCohort": string(kueue.PreemptionPolicyNever),
		"borrowWithinCohort":  map[string]any{"policy": string(kueue.BorrowWithinCohortPolicyNever)},
	}
	if pr := cq.Preemption; pr != nil {
		setString(preemption, "withinClusterQueue", pr.WithinClusterQueue)
		setString(preemption, "reclaimWithinCohort", pr.ReclaimWithinCohort)
		if b := pr.BorrowWithinCohort; b != nil {
			bw := map[string]any{"policy": string(kueue.BorrowWithinCohortPolicyNever)}
			setString(bw, "policy", b.Policy)
			if b.MaxPriorityThreshold != nil {
				bw["maxPriorityThreshold"] = int64(*b.MaxPriorityThreshold)
			}
			preemption["borrowWithinCohort"] = bw
		}
		if c := pr.WithinClusterQueueConfig; c != nil {
			cfg := map[string]any{}
			setDuration(cfg, "minAdmitDuration", c.MinAdmitDuration)
			preemption["withinClusterQueueConfig"] = cfg
		}
		setDuration(preemption, "preemptMinRuntime", pr.PreemptMinRuntime)
		setDuration(preemption, "reclaimMinRuntime", pr.ReclaimMinRuntime)
		setNotice(preemption, pr.NoticePeriod, pr.NoticeOnPriorityPreemption, pr.NoticeOnReclaim)
	}
	spec := map[string]any{
		"queueingStrategy":  strategy,
		"namespaceSelector": map[string]any{},
		"flavorFungibility": map[string]any{"whenCanBorrow": string(kueue.MayStopSearch), "whenCanPreempt": string(kueue.TryNextFlavor)},
		"stopPolicy":        string(kueue.None),
		"preemption":        preemption,
		"resourceGroups":    resourceGroups(cq.Quota),
	}
	if cq.Cohort != "" {
		spec["cohortName"] = cq.Cohort
	}
	if cq.FairSharing != nil && cq.FairSharing.Weight != nil {
		spec["fairSharing"] = map[string]any{"weight": cq.FairSharing.Weight.String()}
	}
	return newRaw("ClusterQueue", cq.Name, spec)
}

// resourceGroups groups flavors that list the same resources, in order of appearance; resources
// are listed in name order.
func resourceGroups(quota []FlavorQuota) []any {
	type group struct {
		covered []string
		flavors []any
	}
	var groups []*group
	for _, fq := range quota {
		names := sortedKeys(fq.Resources)
		var g *group
		for _, candidate := range groups {
			if slices.Equal(candidate.covered, names) {
				g = candidate
			}
		}
		if g == nil {
			g = &group{covered: names}
			groups = append(groups, g)
		}
		var resources []any
		for _, r := range names {
			q := fq.Resources[r]
			rq := map[string]any{"name": r, "nominalQuota": q.Nominal.String()}
			if q.BorrowingLimit != nil {
				rq["borrowingLimit"] = q.BorrowingLimit.String()
			}
			if q.LendingLimit != nil {
				rq["lendingLimit"] = q.LendingLimit.String()
			}
			resources = append(resources, rq)
		}
		g.flavors = append(g.flavors, map[string]any{"name": fq.Flavor, "resources": resources})
	}
	out := make([]any, 0, len(groups))
	for _, g := range groups {
		covered := make([]any, 0, len(g.covered))
		for _, r := range g.covered {
			covered = append(covered, r)
		}
		out = append(out, map[string]any{"coveredResources": covered, "flavors": g.flavors})
	}
	return out
}

func setString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func setDuration(m map[string]any, k string, d *Duration) {
	if d != nil {
		m[k] = d.Duration.String()
	}
}

// typedClusterQueue reads a raw ClusterQueue as Kueue's typed object, which drops our fields, as
// Kueue's own controllers read it.
func typedClusterQueue(u *unstructured.Unstructured) (*kueue.ClusterQueue, error) {
	var cq kueue.ClusterQueue
	if err := fromRaw(u, &cq); err != nil {
		return nil, fmt.Errorf("ClusterQueue %s: %w", u.GetName(), err)
	}
	return &cq, nil
}

func typedCohort(u *unstructured.Unstructured) (*kueue.Cohort, error) {
	var c kueue.Cohort
	if err := fromRaw(u, &c); err != nil {
		return nil, fmt.Errorf("Cohort %s: %w", u.GetName(), err)
	}
	return &c, nil
}

func fromRaw(u *unstructured.Unstructured, out any) error {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// Workload is the Workload object of w as the job controller would create it, at created.
func (w WorkloadSpec) Workload(created time.Time, uid types.UID) *kueue.Workload {
	wl := &kueue.Workload{
		TypeMeta: metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "Workload"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:         w.Namespace,
			Name:              w.Name,
			UID:               uid,
			CreationTimestamp: metav1.NewTime(created),
			Annotations:       copyMap(w.Annotations),
		},
		Spec: kueue.WorkloadSpec{
			QueueName: kueue.LocalQueueName(w.LocalQueue),
			Active:    ptr.To(true),
			PodSets: []kueue.PodSet{{
				Name:     PodSetName,
				Count:    w.Pods,
				Template: w.PodTemplate(),
			}},
		},
	}
	if w.PriorityClass != "" {
		if w.PriorityKind == kueue.PodPriorityClassKind {
			wl.Spec.PriorityClassRef = kueue.NewPodPriorityClassRef(w.PriorityClass)
		} else {
			wl.Spec.PriorityClassRef = kueue.NewWorkloadPriorityClassRef(w.PriorityClass)
		}
		wl.Spec.Priority = ptr.To(w.Priority)
	}
	return wl
}

// PodTemplate is the pod of w: one container asking for w.Requests.
func (w WorkloadSpec) PodTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{
			Name:      "main",
			Image:     "simulated",
			Resources: corev1.ResourceRequirements{Requests: w.Requests.DeepCopy()},
		}},
	}}
}

func copyMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// describeRequests renders requests as cpu=1,memory=2Gi.
func describeRequests(r corev1.ResourceList, pods int32) string {
	names := sortedKeys(r)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		q := r[n]
		parts = append(parts, fmt.Sprintf("%s=%s", n, q.String()))
	}
	s := strings.Join(parts, ",")
	if pods > 1 {
		s = fmt.Sprintf("%dx(%s)", pods, s)
	}
	return s
}

func setNotice(m map[string]any, period *Duration, onPriority, onReclaim *bool) {
	setDuration(m, "noticePeriod", period)
	if onPriority != nil {
		m["noticeOnPriorityPreemption"] = *onPriority
	}
	if onReclaim != nil {
		m["noticeOnReclaim"] = *onReclaim
	}
}
