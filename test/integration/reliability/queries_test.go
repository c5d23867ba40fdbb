package reliability_test

import (
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	"github.com/onsi/gomega"

	"github.com/kueue-timeshare/kueue-timeshare/test/util/promqueries"
)

// served records every series the suite's manager processes serve: each one's /metrics is
// scraped twice a second while it runs. Gauges come and go with the state they show and Kueue
// drops a ClusterQueue's series with it, so the union over the run is what counts.
var served = &seriesRecorder{seen: promqueries.Series{}}

type seriesRecorder struct {
	mu      sync.Mutex
	seen    promqueries.Series
	scrapes int
}

// watch scrapes the manager serving /metrics at addr until done is closed.
func (r *seriesRecorder) watch(addr string, done <-chan struct{}) {
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				r.scrape(addr)
			}
		}
	}()
}

// scrape reads addr's /metrics once; a manager that does not answer is left for the next one.
func (r *seriesRecorder) scrape(addr string) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return
	}
	defer resp.Body.Close()
	s := promqueries.Series{}
	if s.Add(resp.Body) != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen.Merge(s)
	r.scrapes++
}

// After a full run of the suite, whose managers run every kueue-timeshare policy with leader
// election, notices and webhooks, every metric and label the chart's Grafana dashboard and
// alerting rules name must have been served: a query naming a series that does not exist shows
// an empty panel or never fires.
var _ = ginkgo.ReportAfterSuite("the dashboard's and the alerts' queries name served series", func(rep ginkgo.Report) {
	// Only after a whole run: a focused or filtered one need not have exercised every feature,
	// and a failed one already fails. Specs that skip themselves (the long form's) do not count.
	c := rep.SuiteConfig
	if rep.SuiteHasProgrammaticFocus || len(c.FocusStrings)+len(c.SkipStrings)+len(c.FocusFiles)+len(c.SkipFiles) > 0 || c.LabelFilter != "" {
		ginkgo.GinkgoWriter.Printf("queries: not checked, the run was focused or filtered\n")
		return
	}
	for _, s := range rep.SpecReports {
		if s.LeafNodeType == types.NodeTypeIt && s.State.Is(types.SpecStateFailureStates) {
			ginkgo.GinkgoWriter.Printf("queries: not checked, a spec failed (%s)\n", s.FullText())
			return
		}
	}
	queries, err := promqueries.Load(root)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	served.mu.Lock()
	defer served.mu.Unlock()
	gomega.Expect(served.scrapes).To(gomega.BeNumerically(">", 0), "no /metrics scrape succeeded")
	var problems []string
	for _, q := range queries {
		problems = append(problems, promqueries.Check(q, served.seen)...)
	}
	gomega.Expect(problems).To(gomega.BeEmpty(), "after %d scrapes:\n%s", served.scrapes, strings.Join(problems, "\n"))
	ginkgo.GinkgoWriter.Printf("queries: %d queries of the dashboard and the alerts checked against %d scrapes\n", len(queries), served.scrapes)
})
