package simulator

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// all lists the objects, kind by kind (namespaces left out), as manifests are applied.
func (o *Objects) all() []client.Object {
	var out []client.Object
	v := reflect.ValueOf(o).Elem()
	for i := 1; i < v.NumField(); i++ {
		for j := range v.Field(i).Len() {
			out = append(out, v.Field(i).Index(j).Interface().(client.Object))
		}
	}
	return out
}

func (o *Objects) deepCopy() *Objects {
	out := &Objects{}
	in, to := reflect.ValueOf(o).Elem(), reflect.ValueOf(out).Elem()
	for i := range in.NumField() {
		list := reflect.MakeSlice(in.Field(i).Type(), 0, in.Field(i).Len())
		for j := range in.Field(i).Len() {
			list = reflect.Append(list, in.Field(i).Index(j).MethodByName("DeepCopy").Call(nil)[0])
		}
		to.Field(i).Set(list)
	}
	return out
}

// clusterQueueDefaults are the defaults of Kueue's ClusterQueue schema, which the API server
// writes.
var clusterQueueDefaults = map[string]any{
	"spec.queueingStrategy":                     string(kueue.BestEffortFIFO),
	"spec.namespaceSelector":                    map[string]any{},
	"spec.stopPolicy":                           string(kueue.None),
	"spec.flavorFungibility.whenCanBorrow":      string(kueue.MayStopSearch),
	"spec.flavorFungibility.whenCanPreempt":     string(kueue.TryNextFlavor),
	"spec.preemption.withinClusterQueue":        string(kueue.PreemptionPolicyNever),
	"spec.preemption.reclaimWithinCohort":       string(kueue.PreemptionPolicyNever),
	"spec.preemption.borrowWithinCohort.policy": string(kueue.BorrowWithinCohortPolicyNever),
}

// complete adds what the API server and the scenario's defaults add: the schema's defaults, the
// LocalQueues of a scenario that declares none (one per ClusterQueue, same name, namespace
// default) or of a workload that names a ClusterQueue without one, and the namespaces.
func (s *Scenario) complete() {
	for _, u := range s.ClusterQueues {
		for path, v := range clusterQueueDefaults {
			if _, found, _ := unstructured.NestedFieldNoCopy(u.Object, strings.Split(path, ".")...); !found {
				_ = unstructured.SetNestedField(u.Object, runtime.DeepCopyJSONValue(v), strings.Split(path, ".")...)
			}
		}
	}
	newLQ := func(ns, name, cq string) *kueue.LocalQueue {
		return &kueue.LocalQueue{
			TypeMeta:   metav1.TypeMeta{APIVersion: kueue.SchemeGroupVersion.String(), Kind: "LocalQueue"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(cq)},
		}
	}
	if len(s.LocalQueues) == 0 {
		for _, cq := range s.ClusterQueues {
			s.LocalQueues = append(s.LocalQueues, newLQ(DefaultNamespace, cq.GetName(), cq.GetName()))
		}
	}
	for _, w := range s.Workloads {
		if w.ClusterQueue != "" && s.clusterQueue(w.ClusterQueue) != nil && s.localQueueFor(w.ClusterQueue) == nil && !slices.ContainsFunc(s.LocalQueues, func(lq *kueue.LocalQueue) bool {
			return lq.Namespace == DefaultNamespace && lq.Name == w.ClusterQueue
		}) {
			s.LocalQueues = append(s.LocalQueues, newLQ(DefaultNamespace, w.ClusterQueue, w.ClusterQueue))
		}
	}
	s.Namespaces = nil
	for _, lq := range s.LocalQueues {
		if lq.Namespace == "" {
			lq.Namespace = DefaultNamespace
		}
		if !slices.ContainsFunc(s.Namespaces, func(ns *corev1.Namespace) bool { return ns.Name == lq.Namespace }) {
			s.Namespaces = append(s.Namespaces, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: lq.Namespace}})
		}
	}
}

// clusterQueue is the named ClusterQueue as Kueue reads it; nil if there is none.
func (s *Scenario) clusterQueue(name string) *kueue.ClusterQueue {
	if i := slices.IndexFunc(s.ClusterQueues, func(u *unstructured.Unstructured) bool { return u.GetName() == name }); i >= 0 {
		cq, _ := typedObject[kueue.ClusterQueue](s.ClusterQueues[i])
		return cq
	}
	return nil
}

// localQueueFor returns the first LocalQueue pointing to cq.
func (s *Scenario) localQueueFor(cq string) *kueue.LocalQueue {
	if i := slices.IndexFunc(s.LocalQueues, func(lq *kueue.LocalQueue) bool { return string(lq.Spec.ClusterQueue) == cq }); i >= 0 {
		return s.LocalQueues[i]
	}
	return nil
}

func (s *Scenario) localQueuesNamed(name, namespace string) []*kueue.LocalQueue {
	var out []*kueue.LocalQueue
	for _, lq := range s.LocalQueues {
		if lq.Name == name && (namespace == "" || lq.Namespace == namespace) {
			out = append(out, lq)
		}
	}
	return out
}

// priorityClass finds a priority class by name: its kind and value.
func (s *Scenario) priorityClass(name string) (kueue.PriorityClassKind, int32, bool) {
	if i := slices.IndexFunc(s.WorkloadPriorityClasses, func(pc *kueue.WorkloadPriorityClass) bool { return pc.Name == name }); i >= 0 {
		return kueue.WorkloadPriorityClassKind, s.WorkloadPriorityClasses[i].Value, true
	}
	if i := slices.IndexFunc(s.PriorityClasses, func(pc *schedulingv1.PriorityClass) bool { return pc.Name == name }); i >= 0 {
		return kueue.PodPriorityClassKind, s.PriorityClasses[i].Value, true
	}
	return "", 0, false
}

// withoutEmptyMeta drops the empty creationTimestamp and status that typed objects marshal.
func withoutEmptyMeta(obj any) map[string]any {
	data, _ := json.Marshal(obj)
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "creationTimestamp")
	}
	delete(m, "status")
	return m
}

// queueSpec is what a ClusterQueue and a Cohort share that the simulator reads.
type queueSpec struct {
	Spec struct{ ResourceGroups []kueue.ResourceGroup }
}

// rootOf gives the root of the tree above a cohort (itself at the root, "" for none) and
// whether its parents form a cycle.
func (s *Scenario) rootOf() func(cohort string) (root string, cycle bool) {
	parents := map[string]string{}
	for _, u := range s.Cohorts {
		parents[u.GetName()], _, _ = unstructured.NestedString(u.Object, "spec", "parentName")
	}
	return func(c string) (string, bool) {
		for seen := sets.New[string](); parents[c] != ""; c = parents[c] {
			if seen.Has(c) {
				return c, true
			}
			seen.Insert(c)
		}
		return c, false
	}
}

// typedObject reads a raw ClusterQueue or Cohort as Kueue's typed object, which drops our
// fields, as Kueue's own controllers read it.
func typedObject[T any](u *unstructured.Unstructured) (*T, error) {
	var out T
	data, err := json.Marshal(u.Object)
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return &out, nil
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
			Annotations:       maps.Clone(w.Annotations),
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

// describeRequests renders requests as cpu=1,memory=2Gi.
func describeRequests(r corev1.ResourceList, pods int32) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(r)) {
		parts = append(parts, fmt.Sprintf("%s=%s", n, ptr.To(r[n]).String()))
	}
	s := strings.Join(parts, ",")
	if pods > 1 {
		s = fmt.Sprintf("%dx(%s)", pods, s)
	}
	return s
}
