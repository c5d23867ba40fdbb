package chart_test

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

var _ = ginkgo.Describe("The dashboard, the alerts and the image digest", func() {
	ginkgo.It("are off by default: no dashboard ConfigMap, no PrometheusRule, the image by tag", func() {
		objs, err := render()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(ofKind(objs, "PrometheusRule")).To(gomega.BeEmpty())
		for _, cm := range ofKind(objs, "ConfigMap") {
			gomega.Expect(cm.GetLabels()).NotTo(gomega.HaveKey("grafana_dashboard"))
		}
		deploy := ofKind(objs, "Deployment")
		gomega.Expect(deploy).To(gomega.HaveLen(1))
		containers, _, _ := unstructured.NestedSlice(deploy[0].Object, "spec", "template", "spec", "containers")
		gomega.Expect(containers[0].(map[string]any)["image"]).To(gomega.Equal("kueue-timeshare:" + appVersion()))
	})

	ginkgo.It("renders the dashboard as a ConfigMap Grafana's sidecar loads, holding files/grafana-dashboard.json", func() {
		objs, err := render("metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.namespace=monitoring",
			"metrics.grafanaDashboard.annotations.grafana_folder=Batch")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var dash *unstructured.Unstructured
		for _, cm := range ofKind(objs, "ConfigMap") {
			if cm.GetLabels()["grafana_dashboard"] == "1" {
				dash = cm
			}
		}
		gomega.Expect(dash).NotTo(gomega.BeNil(), "a ConfigMap labelled grafana_dashboard: \"1\"")
		gomega.Expect(dash.GetNamespace()).To(gomega.Equal("monitoring"))
		gomega.Expect(dash.GetAnnotations()).To(gomega.HaveKeyWithValue("grafana_folder", "Batch"))
		data, _, _ := unstructured.NestedStringMap(dash.Object, "data")
		var got, want any
		gomega.Expect(json.Unmarshal([]byte(data["kueue-timeshare.json"]), &got)).To(gomega.Succeed())
		file, err := os.ReadFile(filepath.Join(chartDir, "files", "grafana-dashboard.json"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(json.Unmarshal(file, &want)).To(gomega.Succeed())
		gomega.Expect(cmp.Diff(want, got)).To(gomega.BeEmpty())
	})

	ginkgo.It("renders the alerts as a PrometheusRule with the rules of files/prometheus-rules.yaml, labelled for selection", func() {
		objs, err := render("metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=prometheus")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		rules := ofKind(objs, "PrometheusRule")
		gomega.Expect(rules).To(gomega.HaveLen(1))
		gomega.Expect(rules[0].GetAPIVersion()).To(gomega.Equal("monitoring.coreos.com/v1"))
		gomega.Expect(rules[0].GetNamespace()).To(gomega.Equal(namespace))
		gomega.Expect(rules[0].GetLabels()).To(gomega.HaveKeyWithValue("release", "prometheus"))
		file, err := os.ReadFile(filepath.Join(chartDir, "files", "prometheus-rules.yaml"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var want map[string]any
		gomega.Expect(yaml.Unmarshal(file, &want)).To(gomega.Succeed())
		gomega.Expect(cmp.Diff(want, rules[0].Object["spec"])).To(gomega.BeEmpty())
		names := []string{}
		groups, _, _ := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
		for _, g := range groups {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				names = append(names, r.(map[string]any)["alert"].(string))
			}
		}
		gomega.Expect(names).To(gomega.ConsistOf("KueueTimeshareTurnOverdue", "KueueTimeshareNoticeEndedWithoutCheckpoint",
			"KueueTimeshareWorkloadsWaitingLong", "KueueTimeshareNoLeader", "KueueTimeshareWebhookErrors"))
	})

	ginkgo.It("pulls the image by digest when image.digest is set", func() {
		digest := "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		objs, err := render("image.repository=registry.example.com/kueue-timeshare", "image.digest="+digest)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		containers, _, _ := unstructured.NestedSlice(ofKind(objs, "Deployment")[0].Object, "spec", "template", "spec", "containers")
		gomega.Expect(containers[0].(map[string]any)["image"]).To(gomega.Equal("registry.example.com/kueue-timeshare:" + appVersion() + "@" + digest))

		_, err = render("image.digest=latest")
		gomega.Expect(err).To(gomega.HaveOccurred())
		gomega.Expect(err.Error()).To(gomega.ContainSubstring("/image/digest"))
	})
})

// appVersion is the chart's appVersion, the image tag by default.
func appVersion() string {
	ginkgo.GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	gomega.Expect(yaml.Unmarshal(raw, &chart)).To(gomega.Succeed())
	return chart.AppVersion
}
