// Package alerts_test checks the chart's alerting rules with promtool (bin/promtool, built by
// `make test`): that Prometheus loads them, and that each fires, or stays quiet, as its unit
// tests on synthetic series in testdata/rules_test.yaml say.
package alerts_test

import (
	"testing"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

func TestAlerts(t *testing.T) {
	gomega.RegisterFailHandler(ginkgo.Fail)
	ginkgo.RunSpecs(t, "Alerting rules suite")
}
