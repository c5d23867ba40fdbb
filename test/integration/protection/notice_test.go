package protection_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// noticeObject is a ClusterQueue or Cohort written through version, with spec.preemption set to
// preemption; a ClusterQueue gets the fields both versions require.
func noticeObject(kind, version, name string, preemption map[string]any) *unstructured.Unstructured {
	spec := map[string]any{}
	if kind == "ClusterQueue" {
		spec = map[string]any{
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu"},
				"flavors": []any{map[string]any{"name": "default-flavor",
					"resources": []any{map[string]any{"name": "cpu", "nominalQuota": "1"}}}},
			}},
		}
	}
	if preemption != nil {
		spec["preemption"] = preemption
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: version, Kind: kind})
	u.SetName(name)
	return u
}

// PreemptionNotice is on by default; these specs turn it off (the webhook runs in this process and
// reads the process-wide gate on each request). test/integration/conversion checks that the fields
// are accepted and kept in both versions with it on.
var _ = ginkgo.Describe("Notice settings while the PreemptionNotice gate is off", func() {
	ctx := context.Background()

	ginkgo.BeforeEach(func() {
		gomega.Expect(utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{"PreemptionNotice": false})).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() {
			gomega.Expect(utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{"PreemptionNotice": true})).To(gomega.Succeed())
		})
	})

	ginkgo.DescribeTable("a setting that would change what happens to a victim is refused, naming the field and the gate",
		func(kind, version string, preemption map[string]any, wantFields ...string) {
			obj := noticeObject(kind, version, fmt.Sprintf("notice-off-%s-%s", strings.ToLower(kind), version), preemption)
			err := env.Client.Create(ctx, obj)
			if err == nil {
				ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, obj))).To(gomega.Succeed()) })
			}
			gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
			for _, f := range wantFields {
				gomega.Expect(err.Error()).To(gomega.ContainSubstring(f + ": Forbidden: needs the PreemptionNotice feature gate, which is off"))
			}
			gomega.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()))).To(gomega.BeTrue(), "nothing stored")
		},
		ginkgo.Entry("noticePeriod on a ClusterQueue through v1beta2", "ClusterQueue", "v1beta2",
			map[string]any{"noticePeriod": "5m"}, "spec.preemption.noticePeriod"),
		ginkgo.Entry("noticePeriod and an extension on a ClusterQueue through v1beta1", "ClusterQueue", "v1beta1",
			map[string]any{"noticePeriod": "30s", "noticeOnPriorityPreemption": true},
			"spec.preemption.noticePeriod", "spec.preemption.noticeOnPriorityPreemption"),
		ginkgo.Entry("noticePeriod on a Cohort through v1beta2", "Cohort", "v1beta2",
			map[string]any{"noticePeriod": "1h"}, "spec.preemption.noticePeriod"),
		ginkgo.Entry("an extension alone on a Cohort through v1beta1", "Cohort", "v1beta1",
			map[string]any{"noticeOnReclaim": true}, "spec.preemption.noticeOnReclaim"),
	)

	ginkgo.DescribeTable("no notice, written explicitly, is accepted and kept",
		func(kind, version string) {
			preemption := map[string]any{"noticePeriod": "0s", "noticeOnPriorityPreemption": false, "noticeOnReclaim": false}
			obj := noticeObject(kind, version, fmt.Sprintf("notice-zero-%s-%s", strings.ToLower(kind), version), preemption)
			gomega.Expect(env.Client.Create(ctx, obj)).To(gomega.Succeed())
			ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, obj))).To(gomega.Succeed()) })
			got := noticeObject(kind, version, obj.GetName(), nil)
			gomega.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(gomega.Succeed())
			stored, _, _ := unstructured.NestedMap(got.Object, "spec", "preemption")
			for k, v := range preemption {
				gomega.Expect(stored).To(gomega.HaveKeyWithValue(k, v))
			}
		},
		ginkgo.Entry(nil, "ClusterQueue", "v1beta2"),
		ginkgo.Entry(nil, "ClusterQueue", "v1beta1"),
		ginkgo.Entry(nil, "Cohort", "v1beta2"),
		ginkgo.Entry(nil, "Cohort", "v1beta1"),
	)

	ginkgo.It("refuses an update that adds a notice and keeps the stored object", func() {
		obj := noticeObject("ClusterQueue", "v1beta2", "notice-off-update", map[string]any{"preemptMinRuntime": "1m"})
		gomega.Expect(env.Client.Create(ctx, obj)).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, obj))).To(gomega.Succeed()) })
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u := noticeObject("ClusterQueue", "v1beta1", obj.GetName(), nil)
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
				return err
			}
			if err := unstructured.SetNestedField(u.Object, "2m", "spec", "preemption", "noticePeriod"); err != nil {
				return err
			}
			return env.Client.Update(ctx, u)
		})
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("spec.preemption.noticePeriod: Forbidden: needs the PreemptionNotice feature gate"))
		got := noticeObject("ClusterQueue", "v1beta2", obj.GetName(), nil)
		gomega.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(gomega.Succeed())
		stored, _, _ := unstructured.NestedMap(got.Object, "spec", "preemption")
		gomega.Expect(stored).NotTo(gomega.HaveKey("noticePeriod"))
		gomega.Expect(stored).To(gomega.HaveKeyWithValue("preemptMinRuntime", "1m"))
	})

	// The webhook runs in this process and reads the process-wide gate on each request.
	ginkgo.It("keeps a notice stored while the gate was on through other updates, and refuses changing it", func() {
		setGate := func(on bool) {
			gomega.Expect(utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{"PreemptionNotice": on})).To(gomega.Succeed())
		}
		ginkgo.DeferCleanup(setGate, false)
		setGate(true)
		obj := noticeObject("Cohort", "v1beta2", "notice-stored", map[string]any{"noticePeriod": "5m", "noticeOnReclaim": true})
		gomega.Expect(env.Client.Create(ctx, obj)).To(gomega.Succeed())
		ginkgo.DeferCleanup(func() { gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, obj))).To(gomega.Succeed()) })
		setGate(false)

		update := func(version string, path []string, value any) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				u := noticeObject("Cohort", version, obj.GetName(), nil)
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), u); err != nil {
					return err
				}
				if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
					return err
				}
				return env.Client.Update(ctx, u)
			})
		}
		ginkgo.By("updating another field, through either version")
		gomega.Expect(update("v1beta2", []string{"spec", "parentName"}, "org")).To(gomega.Succeed())
		gomega.Expect(update("v1beta1", []string{"metadata", "labels"}, map[string]any{"team": "ml"})).To(gomega.Succeed())

		ginkgo.By("changing the notice")
		err := update("v1beta1", []string{"spec", "preemption", "noticePeriod"}, "10m")
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("spec.preemption.noticePeriod: Forbidden: needs the PreemptionNotice feature gate"))
		gomega.Expect(err.Error()).NotTo(gomega.ContainSubstring("noticeOnReclaim"), "the unchanged extension is not reported")

		ginkgo.By("turning it off")
		gomega.Expect(update("v1beta2", []string{"spec", "preemption", "noticePeriod"}, "0s")).To(gomega.Succeed())
		got := noticeObject("Cohort", "v1beta2", obj.GetName(), nil)
		gomega.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(gomega.Succeed())
		stored, _, _ := unstructured.NestedMap(got.Object, "spec", "preemption")
		gomega.Expect(stored).To(gomega.Equal(map[string]any{"noticePeriod": "0s", "noticeOnReclaim": true}))
		gomega.Expect(got.GetLabels()).To(gomega.HaveKeyWithValue("team", "ml"))
	})
})
