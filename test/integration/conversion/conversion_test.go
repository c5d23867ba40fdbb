package conversion_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

const (
	group   = "kueue.x-k8s.io"
	v1beta1 = "v1beta1"
	v1beta2 = "v1beta2"
)

// samples hold a value for every kueue-timeshare field of a kind, at its path. Every field of
// tsapi.Fields must have one (checked below), so a field added later is tested here too.
var samples = map[string]map[string]any{
	"ClusterQueue": {
		"spec.preemption.withinClusterQueueConfig":   map[string]any{"minAdmitDuration": "5m"},
		"spec.preemption.preemptMinRuntime":          "2m",
		"spec.preemption.reclaimMinRuntime":          "0s",
		"spec.preemption.noticePeriod":               "10m",
		"spec.preemption.noticeOnPriorityPreemption": true,
		"spec.preemption.noticeOnReclaim":            false,
		"spec.preemption.preemptionBudget": map[string]any{"maxPreemptions": int64(2), "period": "1h", "burst": int64(3),
			"perWorkload": map[string]any{"maxPreemptions": int64(1), "period": "24h"}},
	},
	"Cohort": {
		"spec.preemption": map[string]any{"preemptMinRuntime": "30m", "reclaimMinRuntime": "1h",
			"noticePeriod": "1h", "noticeOnPriorityPreemption": false, "noticeOnReclaim": true,
			"preemptionBudget": map[string]any{"maxPreemptions": int64(10), "period": "168h"}},
	},
}

// cohortField is where each version keeps a ClusterQueue's cohort: upstream's conversion renames
// it, so reading it through the other version shows that the conversion webhook ran.
var cohortField = map[string]string{v1beta1: "cohort", v1beta2: "cohortName"}

func newObject(kind, version, name string, fields map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	u.SetName(name)
	if kind == "ClusterQueue" {
		u.Object["spec"] = map[string]any{
			cohortField[version]: "research",
			"namespaceSelector":  map[string]any{},
			"preemption":         map[string]any{"withinClusterQueue": "LowerOrNewerEqualPriority"},
			"resourceGroups": []any{map[string]any{
				"coveredResources": []any{"cpu"},
				"flavors": []any{map[string]any{"name": "default-flavor",
					"resources": []any{map[string]any{"name": "cpu", "nominalQuota": "4"}}}},
			}},
		}
	}
	for path, v := range fields {
		gomega.Expect(unstructured.SetNestedField(u.Object, runtimeCopy(v), strings.Split(path, ".")...)).To(gomega.Succeed())
	}
	return u
}

// runtimeCopy gives each object its own copy of a sample's maps.
func runtimeCopy(v any) any {
	if m, ok := v.(map[string]any); ok {
		out := map[string]any{}
		for k, x := range m {
			out[k] = runtimeCopy(x)
		}
		return out
	}
	return v
}

func get(g gomega.Gomega, ctx context.Context, kind, version, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: name}, u)).To(gomega.Succeed())
	g.Expect(u.GetAPIVersion()).To(gomega.Equal(group + "/" + version))
	return u
}

// ourFields reads every declared field of kind from obj.
func ourFields(kind string, obj *unstructured.Unstructured) map[string]any {
	got := map[string]any{}
	for _, f := range tsapi.Fields()[kind] {
		if v, found, _ := unstructured.NestedFieldCopy(obj.Object, f.Path()...); found {
			got[f.String()] = v
		}
	}
	return got
}

func expectOurFields(kind string, obj *unstructured.Unstructured) {
	ginkgo.GinkgoHelper()
	gomega.Expect(cmp.Diff(samples[kind], ourFields(kind, obj))).To(gomega.BeEmpty(), "%s fields (-want +got)", kind)
}

func deleteLater(ctx context.Context, obj *unstructured.Unstructured) {
	ginkgo.DeferCleanup(func() {
		gomega.Expect(client.IgnoreNotFound(env.Client.Delete(ctx, obj))).To(gomega.Succeed())
	})
}

func other(version string) string {
	if version == v1beta1 {
		return v1beta2
	}
	return v1beta1
}

var _ = ginkgo.Describe("Every served version keeps kueue-timeshare's fields", func() {
	ctx := context.Background()

	ginkgo.It("has a sample for every declared field", func() {
		for kind, fields := range tsapi.Fields() {
			var paths []string
			for _, f := range fields {
				paths = append(paths, f.String())
			}
			var sampled []string
			for p := range samples[kind] {
				sampled = append(sampled, p)
			}
			gomega.Expect(sampled).To(gomega.ConsistOf(paths), kind)
		}
	})

	ginkgo.It("converts the five two-version kinds through the manager's /convert, as the chart does", func() {
		s := runtime.NewScheme()
		gomega.Expect(apiextensionsv1.AddToScheme(s)).To(gomega.Succeed())
		c, err := client.New(env.ControlPlane.Config, client.Options{Scheme: s})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var crds apiextensionsv1.CustomResourceDefinitionList
		gomega.Expect(c.List(ctx, &crds)).To(gomega.Succeed())
		converting := map[string]bool{}
		for _, crd := range crds.Items {
			c := crd.Spec.Conversion
			if c == nil || c.Strategy != apiextensionsv1.WebhookConverter {
				continue
			}
			converting[crd.Name] = true
			gomega.Expect(c.Webhook.ClientConfig.URL).NotTo(gomega.BeNil(), crd.Name)
			gomega.Expect(*c.Webhook.ClientConfig.URL).To(gomega.HaveSuffix(
				fmt.Sprintf(":%d/convert", env.ControlPlane.Env.WebhookInstallOptions.LocalServingPort)), crd.Name)
		}
		gomega.Expect(converting).To(gomega.Equal(map[string]bool{
			"clusterqueues.kueue.x-k8s.io": true, "cohorts.kueue.x-k8s.io": true, "localqueues.kueue.x-k8s.io": true,
			"multikueueclusters.kueue.x-k8s.io": true, "workloads.kueue.x-k8s.io": true,
		}))
	})

	ginkgo.DescribeTable("written through one version, read, listed and stored through the other",
		func(kind, written string) {
			name := strings.ToLower(kind) + "-from-" + written
			obj := newObject(kind, written, name, samples[kind])
			gomega.Expect(env.Client.Create(ctx, obj)).To(gomega.Succeed())
			deleteLater(ctx, obj)

			read := get(gomega.Default, ctx, kind, other(written), name)
			expectOurFields(kind, read)
			if kind == "ClusterQueue" {
				cohort, _, _ := unstructured.NestedString(read.Object, "spec", cohortField[other(written)])
				gomega.Expect(cohort).To(gomega.Equal("research"), "upstream's conversion renames the cohort field")
			}

			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: other(written), Kind: kind + "List"})
			gomega.Expect(env.Client.List(ctx, list)).To(gomega.Succeed())
			i := slices.IndexFunc(list.Items, func(u unstructured.Unstructured) bool { return u.GetName() == name })
			gomega.Expect(i).NotTo(gomega.Equal(-1))
			expectOurFields(kind, &list.Items[i])

			// And in the version it was written through, after a round trip through storage.
			expectOurFields(kind, get(gomega.Default, ctx, kind, written, name))
		},
		ginkgo.Entry("ClusterQueue, v1beta1 to v1beta2", "ClusterQueue", v1beta1),
		ginkgo.Entry("ClusterQueue, v1beta2 to v1beta1", "ClusterQueue", v1beta2),
		ginkgo.Entry("Cohort, v1beta1 to v1beta2", "Cohort", v1beta1),
		ginkgo.Entry("Cohort, v1beta2 to v1beta1", "Cohort", v1beta2),
	)

	// change is an edit to an upstream field, in the updating client's version.
	change := map[string]struct {
		path  []string
		value string
	}{
		"ClusterQueue": {path: []string{"spec", "preemption", "reclaimWithinCohort"}, value: "Any"},
		"Cohort":       {path: []string{"spec", "parentName"}, value: "org"},
	}

	ginkgo.DescribeTable("updated through the other version by a client that never saw the fields",
		func(kind, written, method string) {
			name := fmt.Sprintf("%s-%s-%s", strings.ToLower(kind), written, method)
			gomega.Expect(env.Client.Create(ctx, newObject(kind, written, name, samples[kind]))).To(gomega.Succeed())
			deleteLater(ctx, newObject(kind, written, name, nil))
			updater, edit := other(written), change[kind]
			gvk := schema.GroupVersionKind{Group: group, Version: updater, Kind: kind}

			switch method {
			case "update":
				// Read-modify-write of the whole object, as kubectl edit or a controller on
				// unstructured objects does: what it read is what it writes back.
				gomega.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
					u := get(gomega.Default, ctx, kind, updater, name)
					if err := unstructured.SetNestedField(u.Object, edit.value, edit.path...); err != nil {
						return err
					}
					return env.Client.Update(ctx, u)
				})).To(gomega.Succeed())
			case "server-side-apply":
				// A manifest of the updater's version without our fields, as a GitOps tool applies it.
				manifest := &unstructured.Unstructured{Object: map[string]any{}}
				manifest.SetGroupVersionKind(gvk)
				manifest.SetName(name)
				gomega.Expect(unstructured.SetNestedField(manifest.Object, edit.value, edit.path...)).To(gomega.Succeed())
				gomega.Expect(env.Client.Patch(ctx, manifest, client.Apply, client.FieldOwner("gitops"), client.ForceOwnership)).To(gomega.Succeed())
			case "client-side-apply":
				// kubectl apply without --server-side sends custom resources a JSON merge patch
				// of what changed, with the manifest it applied in an annotation.
				manifest := map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": kind, "metadata": map[string]any{"name": name}}
				gomega.Expect(unstructured.SetNestedField(manifest, edit.value, edit.path...)).To(gomega.Succeed())
				lastApplied, err := json.Marshal(manifest)
				gomega.Expect(err).NotTo(gomega.HaveOccurred())
				patch := map[string]any{"metadata": map[string]any{"annotations": map[string]any{
					"kubectl.kubernetes.io/last-applied-configuration": string(lastApplied)}}}
				gomega.Expect(unstructured.SetNestedField(patch, edit.value, edit.path...)).To(gomega.Succeed())
				data, err := json.Marshal(patch)
				gomega.Expect(err).NotTo(gomega.HaveOccurred())
				target := &unstructured.Unstructured{}
				target.SetGroupVersionKind(gvk)
				target.SetName(name)
				gomega.Expect(env.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, data))).To(gomega.Succeed())
			default:
				ginkgo.Fail("unknown method " + method)
			}

			for _, version := range []string{v1beta1, v1beta2} {
				got := get(gomega.Default, ctx, kind, version, name)
				v, _, _ := unstructured.NestedString(got.Object, edit.path...)
				gomega.Expect(v).To(gomega.Equal(edit.value), "the update took effect (%s)", version)
				expectOurFields(kind, got)
			}
		},
		func(kind, written, method string) string {
			return fmt.Sprintf("%s written through %s, %s through %s", kind, written, method, other(written))
		},
		ginkgo.Entry(nil, "ClusterQueue", v1beta2, "update"),
		ginkgo.Entry(nil, "ClusterQueue", v1beta2, "server-side-apply"),
		ginkgo.Entry(nil, "ClusterQueue", v1beta2, "client-side-apply"),
		ginkgo.Entry(nil, "ClusterQueue", v1beta1, "update"),
		ginkgo.Entry(nil, "ClusterQueue", v1beta1, "server-side-apply"),
		ginkgo.Entry(nil, "ClusterQueue", v1beta1, "client-side-apply"),
		ginkgo.Entry(nil, "Cohort", v1beta2, "update"),
		ginkgo.Entry(nil, "Cohort", v1beta2, "server-side-apply"),
		ginkgo.Entry(nil, "Cohort", v1beta2, "client-side-apply"),
		ginkgo.Entry(nil, "Cohort", v1beta1, "update"),
		ginkgo.Entry(nil, "Cohort", v1beta1, "server-side-apply"),
		ginkgo.Entry(nil, "Cohort", v1beta1, "client-side-apply"),
	)

	ginkgo.DescribeTable("an invalid value written through v1beta1 is rejected, naming the field and the rule",
		func(kind string, fields map[string]any, wantFragments ...string) {
			obj := newObject(kind, v1beta1, "invalid-through-v1beta1", fields)
			err := env.Client.Create(ctx, obj)
			if err == nil {
				deleteLater(ctx, obj)
			}
			gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
			for _, f := range wantFragments {
				gomega.Expect(err.Error()).To(gomega.ContainSubstring(f))
			}
			for _, version := range []string{v1beta1, v1beta2} {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: version, Kind: kind})
				gomega.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: obj.GetName()}, u))).To(gomega.BeTrue())
			}
		},
		ginkgo.Entry("minAdmitDuration under a minute", "ClusterQueue",
			map[string]any{"spec.preemption.withinClusterQueueConfig": map[string]any{"minAdmitDuration": "30s"}},
			"spec.preemption.withinClusterQueueConfig.minAdmitDuration", "must be at least 1m0s"),
		ginkgo.Entry("minAdmitDuration with another withinClusterQueue", "ClusterQueue",
			map[string]any{"spec.preemption.withinClusterQueue": "LowerPriority", "spec.preemption.withinClusterQueueConfig": map[string]any{"minAdmitDuration": "1h"}},
			"spec.preemption.withinClusterQueueConfig", "requires spec.preemption.withinClusterQueue to be LowerOrNewerEqualPriority, not LowerPriority"),
		ginkgo.Entry("a negative preemptMinRuntime on a ClusterQueue", "ClusterQueue",
			map[string]any{"spec.preemption.preemptMinRuntime": "-1m"},
			"spec.preemption.preemptMinRuntime", "must not be negative"),
		ginkgo.Entry("a negative reclaimMinRuntime on a Cohort", "Cohort",
			map[string]any{"spec.preemption": map[string]any{"reclaimMinRuntime": "-10s"}},
			"spec.preemption.reclaimMinRuntime", "must not be negative"),
		ginkgo.Entry("a notice over an hour on a ClusterQueue", "ClusterQueue",
			map[string]any{"spec.preemption.noticePeriod": "90m"},
			"spec.preemption.noticePeriod", "must be at most 1h0m0s"),
		ginkgo.Entry("a negative notice on a Cohort", "Cohort",
			map[string]any{"spec.preemption": map[string]any{"noticePeriod": "-1m"}},
			"spec.preemption.noticePeriod", "must not be negative"),
		ginkgo.Entry("a notice extension that is not a boolean (schema)", "Cohort",
			map[string]any{"spec.preemption": map[string]any{"noticeOnReclaim": "yes"}},
			"spec.preemption.noticeOnReclaim"),
		ginkgo.Entry("not a duration (schema)", "Cohort",
			map[string]any{"spec.preemption": map[string]any{"preemptMinRuntime": "an hour"}},
			"spec.preemption.preemptMinRuntime"),
	)

	ginkgo.It("rejects an update through v1beta1 that breaks a rule and keeps the stored object", func() {
		obj := newObject("ClusterQueue", v1beta2, "update-through-v1beta1", samples["ClusterQueue"])
		gomega.Expect(env.Client.Create(ctx, obj)).To(gomega.Succeed())
		deleteLater(ctx, obj)
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u := get(gomega.Default, ctx, "ClusterQueue", v1beta1, obj.GetName())
			if err := unstructured.SetNestedField(u.Object, "20s", "spec", "preemption", "withinClusterQueueConfig", "minAdmitDuration"); err != nil {
				return err
			}
			return env.Client.Update(ctx, u)
		})
		gomega.Expect(apierrors.IsInvalid(err)).To(gomega.BeTrue(), "want an Invalid error, got %v", err)
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("spec.preemption.withinClusterQueueConfig.minAdmitDuration"))
		expectOurFields("ClusterQueue", get(gomega.Default, ctx, "ClusterQueue", v1beta2, obj.GetName()))
	})

	// kubectl explain reads the OpenAPI v3 document of the group version.
	ginkgo.It("publishes the fields with their descriptions in the OpenAPI of both versions", func() {
		dc, err := discovery.NewDiscoveryClientForConfig(env.ControlPlane.Config)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Eventually(func(g gomega.Gomega) {
			paths, err := dc.OpenAPIV3().Paths()
			g.Expect(err).NotTo(gomega.HaveOccurred())
			for _, version := range []string{v1beta1, v1beta2} {
				gv, ok := paths["apis/"+group+"/"+version]
				g.Expect(ok).To(gomega.BeTrue(), version)
				data, err := gv.Schema("application/json")
				g.Expect(err).NotTo(gomega.HaveOccurred())
				var doc struct {
					Components struct {
						Schemas map[string]openAPISchema `json:"schemas"`
					} `json:"components"`
				}
				g.Expect(json.Unmarshal(data, &doc)).To(gomega.Succeed())
				for kind, fields := range tsapi.Fields() {
					root, ok := doc.Components.Schemas["io.x-k8s.kueue."+version+"."+kind]
					g.Expect(ok).To(gomega.BeTrue(), "%s %s", kind, version)
					for _, f := range fields {
						s := root.at(f.Path())
						g.Expect(s).NotTo(gomega.BeNil(), "%s %s %s", kind, version, f)
						g.Expect(s.descriptions()).To(gomega.Equal(descriptions(f.Schema)), "%s %s %s", kind, version, f)
					}
				}
			}
		}, "30s", "500ms").Should(gomega.Succeed())
	})
})

type openAPISchema struct {
	Description string                   `json:"description"`
	Properties  map[string]openAPISchema `json:"properties"`
}

func (s openAPISchema) at(path []string) *openAPISchema {
	for _, name := range path {
		child, ok := s.Properties[name]
		if !ok {
			return nil
		}
		s = child
	}
	return &s
}

// descriptions maps each property path below and including s ("" for s) to its description.
func (s openAPISchema) descriptions() map[string]string {
	out := map[string]string{"": s.Description}
	for name, p := range s.Properties {
		for k, d := range p.descriptions() {
			out[strings.TrimSuffix(name+"."+k, ".")] = d
		}
	}
	return out
}

func descriptions(s apiextensionsv1.JSONSchemaProps) map[string]string {
	out := map[string]string{"": s.Description}
	for name, p := range s.Properties {
		for k, d := range descriptions(p) {
			out[strings.TrimSuffix(name+"."+k, ".")] = d
		}
	}
	return out
}
