package chart_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// kustomizeDefault renders config/default with bin/kubectl, as `kubectl apply -k` would.
func kustomizeDefault() []*unstructured.Unstructured {
	ginkgo.GinkgoHelper()
	cmd := exec.Command(filepath.Join(root, "bin", "kubectl"), "kustomize", filepath.Join(root, "config", "default"))
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		err = fmt.Errorf("%w: %s", err, ee.Stderr)
	}
	gomega.Expect(err).NotTo(gomega.HaveOccurred(), "kubectl kustomize config/default (run `make manifests`)")
	objs, err := decodeAll(out)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return objs
}

// configMapHash is the suffix kustomize's configMapGenerator appends.
var configMapHash = regexp.MustCompile(`^(.*-manager-config)-[a-z0-9]{10}$`)

// normalized drops what legitimately differs between the chart and kustomize (Helm's own labels
// helm.sh/chart, app.kubernetes.io/managed-by and app.kubernetes.io/version; the others, such as
// ClusterRole aggregation labels, must agree), its keep policy on CRDs and the config checksum annotation, kustomize's ConfigMap name hash, the
// order of webhooks) and parses the configuration file, keyed by kind, namespace and name.
func normalized(objs []*unstructured.Unstructured) map[string]map[string]any {
	ginkgo.GinkgoHelper()
	out := map[string]map[string]any{}
	strip := func(s string) string { return configMapHash.ReplaceAllString(s, "$1") }
	for _, in := range objs {
		o := in.DeepCopy()
		labels := o.GetLabels()
		for _, k := range []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"} {
			delete(labels, k)
		}
		if len(labels) == 0 {
			labels = nil
		}
		o.SetLabels(labels)
		o.SetName(strip(o.GetName()))
		switch o.GetKind() {
		case "CustomResourceDefinition":
			unstructured.RemoveNestedField(o.Object, "metadata", "annotations", "helm.sh/resource-policy")
		case "ConfigMap":
			var cfg map[string]any
			data, _, _ := unstructured.NestedString(o.Object, "data", "config.yaml")
			gomega.Expect(yaml.Unmarshal([]byte(data), &cfg)).To(gomega.Succeed())
			o.Object["data"] = map[string]any{"config.yaml": cfg}
		case "Deployment":
			unstructured.RemoveNestedField(o.Object, "spec", "template", "metadata", "annotations", "checksum/config")
			volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "volumes")
			for _, v := range volumes {
				if cm, ok := v.(map[string]any)["configMap"].(map[string]any); ok {
					cm["name"] = strip(cm["name"].(string))
				}
			}
			gomega.Expect(unstructured.SetNestedSlice(o.Object, volumes, "spec", "template", "spec", "volumes")).To(gomega.Succeed())
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
			sort.Slice(hooks, func(i, j int) bool {
				return hooks[i].(map[string]any)["name"].(string) < hooks[j].(map[string]any)["name"].(string)
			})
			gomega.Expect(unstructured.SetNestedSlice(o.Object, hooks, "webhooks")).To(gomega.Succeed())
		}
		if len(o.GetAnnotations()) == 0 {
			o.SetAnnotations(nil)
		}
		out[fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())] = o.Object
	}
	return out
}

var _ = ginkgo.Describe("config/default (kubectl apply -k)", ginkgo.Ordered, func() {
	var (
		ctx context.Context
		k   *cluster
	)
	ginkgo.BeforeAll(func() {
		ctx = context.Background()
		k = startCluster()
		gomega.Expect(k.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(gomega.Succeed())
	})

	ginkgo.It("renders objects that pass server-side validation", func() {
		objs := kustomizeDefault()
		gomega.Expect(dryRunApply(ctx, k.client, objs)).To(gomega.Equal(len(objs)))
	})

	ginkgo.It("is the same install as the chart with default values", func() {
		chart, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		want, got := normalized(chart), normalized(kustomizeDefault())
		keys := func(m map[string]map[string]any) []string {
			var ks []string
			for k := range m {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			return ks
		}
		if d := cmp.Diff(keys(want), keys(got)); d != "" {
			ginkgo.Fail("objects (-chart +kustomize):\n" + d)
		}
		for key, w := range want {
			if d := cmp.Diff(w, got[key]); d != "" {
				ginkgo.Fail(fmt.Sprintf("%s (-chart +kustomize):\n%s", key, d))
			}
		}
	})
})
