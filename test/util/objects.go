package util

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/constants"
)

// CPUClusterQueue has nominal quota cpu of the flavor "default-flavor" and admits every namespace.
func CPUClusterQueue(name, cpu string) *kueue.ClusterQueue {
	return &kueue.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kueue.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueue.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU},
				Flavors: []kueue.FlavorQuotas{{
					Name:      "default-flavor",
					Resources: []kueue.ResourceQuota{{Name: corev1.ResourceCPU, NominalQuota: resource.MustParse(cpu)}},
				}},
			}},
		},
	}
}

// CPUJob is a one-pod batch Job asking for cpu, submitted to the LocalQueue queue.
func CPUJob(ns, name, queue, cpu string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{constants.QueueLabel: queue}},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1),
			Completions: ptr.To[int32](1),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{
					Name: "main", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
				}},
			}},
		},
	}
}

// WorkloadOf finds the Workload the job controller created for j; it fails g while there is none.
func WorkloadOf(g gomega.Gomega, ctx context.Context, c client.Client, j *batchv1.Job) *kueue.Workload {
	var list kueue.WorkloadList
	g.Expect(c.List(ctx, &list, client.InNamespace(j.Namespace))).To(gomega.Succeed())
	for i := range list.Items {
		for _, ref := range list.Items[i].OwnerReferences {
			if ref.Kind == "Job" && ref.Name == j.Name {
				return &list.Items[i]
			}
		}
	}
	g.Expect("workload for job "+j.Name).To(gomega.BeEmpty(), "no Workload yet")
	return nil
}

// Unsuspended reports whether Kueue has let j run.
func Unsuspended(g gomega.Gomega, ctx context.Context, c client.Client, j *batchv1.Job) bool {
	var got batchv1.Job
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(gomega.Succeed())
	return !ptr.Deref(got.Spec.Suspend, true)
}

// RawCPUClusterQueue is CPUClusterQueue as an unstructured object with spec.preemption replaced by
// preemption, so that it can carry fields Kueue's typed client would drop.
func RawCPUClusterQueue(name, cpu string, preemption map[string]any) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(CPUClusterQueue(name, cpu))
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(kueue.SchemeGroupVersion.WithKind("ClusterQueue"))
	delete(u.Object, "status")
	if err := unstructured.SetNestedField(u.Object, preemption, "spec", "preemption"); err != nil {
		return nil, err
	}
	return u, nil
}

// CreateClusterQueue creates RawCPUClusterQueue(name, cpu, preemption) in cohort (none if empty),
// and a LocalQueue of the same name in ns pointing to it.
func CreateClusterQueue(ctx context.Context, c client.Client, ns, name, cpu, cohort string, preemption map[string]any) error {
	obj, err := RawCPUClusterQueue(name, cpu, preemption)
	if err != nil {
		return err
	}
	if cohort != "" {
		if err := unstructured.SetNestedField(obj.Object, cohort, "spec", "cohortName"); err != nil {
			return err
		}
	}
	if err := c.Create(ctx, obj); err != nil {
		return err
	}
	return c.Create(ctx, &kueue.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       kueue.LocalQueueSpec{ClusterQueue: kueue.ClusterQueueReference(name)},
	})
}

// CompleteJob reports the running Job j as finished, as the Job controller would once its pods
// succeeded; call it inside Eventually, since the update may conflict.
func CompleteJob(g gomega.Gomega, ctx context.Context, c client.Client, j *batchv1.Job) {
	var got batchv1.Job
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(j), &got)).To(gomega.Succeed())
	g.Expect(ptr.Deref(got.Spec.Suspend, true)).To(gomega.BeFalse(), "%s runs", j.Name)
	now := metav1.Now()
	got.Status.StartTime = &now
	got.Status.CompletionTime = &now
	got.Status.Succeeded = ptr.Deref(got.Spec.Completions, 1)
	got.Status.Conditions = append(got.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now})
	g.Expect(c.Status().Update(ctx, &got)).To(gomega.Succeed())
}

// Describe says, for a failed assertion's message, whether each Job is suspended and its
// Workload's conditions, as the API server has them then.
func Describe(ctx context.Context, c client.Client, jobs ...*batchv1.Job) func() string {
	return func() string {
		var b strings.Builder
		for _, j := range jobs {
			var got batchv1.Job
			if err := c.Get(ctx, client.ObjectKeyFromObject(j), &got); err != nil {
				fmt.Fprintf(&b, "Job %s: %v\n", j.Name, err)
				continue
			}
			fmt.Fprintf(&b, "Job %s: suspend=%t active=%d terminating=%d\n", j.Name, ptr.Deref(got.Spec.Suspend, false), got.Status.Active, ptr.Deref(got.Status.Terminating, 0))
			var list kueue.WorkloadList
			if err := c.List(ctx, &list, client.InNamespace(j.Namespace)); err != nil {
				continue
			}
			for i := range list.Items {
				if owner := metav1.GetControllerOf(&list.Items[i]); owner != nil && owner.Name == j.Name {
					for _, cond := range list.Items[i].Status.Conditions {
						fmt.Fprintf(&b, "  %s=%s (%s) at %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.LastTransitionTime.UTC().Format(time.RFC3339), cond.Message)
					}
				}
			}
		}
		return b.String()
	}
}
