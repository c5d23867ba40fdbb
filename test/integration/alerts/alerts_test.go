package alerts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/test/util/promqueries"
)

var _ = ginkgo.Describe("The alerting rules", func() {
	var promtool, rules string

	ginkgo.BeforeEach(func() {
		root, err := controlplane.FindRoot()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		promtool = filepath.Join(root, controlplane.BinDir, "promtool")
		_, err = os.Stat(promtool)
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "bin/promtool is missing: run `make tools`")
		rules = filepath.Join(root, promqueries.Rules)
	})

	ginkgo.It("pass promtool check rules", func() {
		out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s", out)
		gomega.Expect(string(out)).To(gomega.ContainSubstring("SUCCESS: 5 rules found"))
	})

	ginkgo.It("fire as their unit tests on synthetic series expect (promtool test rules)", func() {
		cmd := exec.Command(promtool, "test", "rules", "rules_test.yaml")
		cmd.Dir = "testdata"
		out, err := cmd.CombinedOutput()
		gomega.Expect(err).NotTo(gomega.HaveOccurred(), "%s", out)
		gomega.Expect(string(out)).To(gomega.ContainSubstring("SUCCESS"))
	})

	ginkgo.It("are each tested: every alert has a case where it fires", func() {
		tests, err := os.ReadFile(filepath.Join("testdata", "rules_test.yaml"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		root, err := controlplane.FindRoot()
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		queries, err := promqueries.Load(root)
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		alerts := 0
		for _, q := range queries {
			name, ok := strings.CutPrefix(q.Source, "alert ")
			if !ok {
				continue
			}
			alerts++
			gomega.Expect(string(tests)).To(gomega.MatchRegexp(`alertname: `+name+`\n\s+exp_alerts:\n\s+- exp_labels:`), "no test where %s fires", name)
		}
		gomega.Expect(alerts).To(gomega.Equal(5))
	})
})
