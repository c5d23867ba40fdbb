// Package conversion_test writes kueue-timeshare's fields through one served version of Kueue's
// API and reads, updates, patches and applies them through the other, on a local control plane
// whose CRDs convert through the manager's /convert, as a cluster installed with the chart does.
package conversion_test

import (
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

var env *util.Env

func TestConversion(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Conversion integration suite")
}

var _ = ginkgo.BeforeSuite(func() {
	log := util.SuiteLogger(ginkgo.GinkgoWriter)
	var err error
	// PreemptionNotice (beta, on) lets the webhooks accept the notice fields, so that they are
	// converted like the others; test/integration/protection checks the refusal with it off.
	// PreemptionBudget (alpha, off) likewise for the budget.
	env, err = util.Start(util.Settings{Log: log, FeatureGates: map[string]bool{"PreemptionNotice": true, "PreemptionBudget": true}})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
})

var _ = ginkgo.AfterSuite(func() {
	if env != nil {
		gomega.Expect(env.Stop()).To(gomega.Succeed())
	}
})
