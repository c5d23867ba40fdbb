package chart_test

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"sigs.k8s.io/yaml"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
)

// opaqueValues are passed through whole (a Kubernetes or Kueue structure): documented as one value.
var opaqueValues = map[string]bool{
	"kueueConfiguration": true, "resources": true, "podSecurityContext": true, "securityContext": true,
	"tenantPolicies.gracePeriod.namespaceSelector": true,
}

// valuePaths lists the dotted paths of values.yaml, down to leaves and opaque values.
func valuePaths(prefix string, m map[string]any) []string {
	var out []string
	for k, v := range m {
		p := strings.TrimPrefix(prefix+"."+k, ".")
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !opaqueValues[p] {
			out = append(out, valuePaths(p, sub)...)
			continue
		}
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

func readDoc(name string) string {
	ginkgo.GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(root, "docs", name))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return string(data)
}

var _ = ginkgo.Describe("The docs", func() {
	ginkgo.It("describe every value of the chart in docs/install.md", func() {
		data, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		var values map[string]any
		gomega.Expect(yaml.Unmarshal(data, &values)).To(gomega.Succeed())
		doc := readDoc("install.md")
		paths := valuePaths("", values)
		gomega.Expect(len(paths)).To(gomega.BeNumerically(">", 30))
		for _, p := range paths {
			gomega.Expect(doc).To(gomega.ContainSubstring("`"+p+"`"), "docs/install.md does not describe the value %s", p)
		}
	})

	ginkgo.It("describe every timeshare field and every feature gate of ours in docs/configuration.md", func() {
		doc := readDoc("configuration.md")
		fields := timeshareFields()
		gomega.Expect(fields).To(gomega.HaveLen(12))
		for _, f := range fields {
			gomega.Expect(doc).To(gomega.ContainSubstring("| `"+f+"` |"), "docs/configuration.md does not describe timeshare.%s", f)
		}
		for _, g := range registeredGates() {
			gomega.Expect(doc).To(gomega.ContainSubstring("| `"+g+"` |"), "docs/configuration.md does not describe the gate %s", g)
		}
	})
})

// timeshareFields are the JSON names of the configuration file's timeshare section, a nested
// section's fields dotted under its name (metrics.longWaitThreshold).
func timeshareFields() []string {
	return jsonFields("", reflect.TypeFor[tsconfig.Configuration]())
}

func jsonFields(prefix string, t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if ft := t.Field(i).Type; ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() {
			out = append(out, jsonFields(prefix+name+".", ft)...)
			continue
		}
		out = append(out, prefix+name)
	}
	return out
}
