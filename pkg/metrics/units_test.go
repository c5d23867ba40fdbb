package metrics

import (
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/notice"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// The units' per-ClusterQueue metrics are served with ours, and a unit that counts workloads has
// its gauge among them.
func TestUnitQueueMetrics(t *testing.T) {
	InitVectors(nil)
	served := perClusterQueue()
	names := func(cs []prometheus.Collector) []string {
		var out []string
		for _, c := range cs {
			descs := make(chan *prometheus.Desc, 1)
			c.Describe(descs)
			out = append(out, regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch((<-descs).String())[1])
		}
		return out
	}
	for _, u := range plugins.Units() {
		q, ok := u.Plugin.(queueMetricsOwner)
		if !ok {
			if UnitGauge(u.Feature) != nil {
				t.Errorf("%s has a gauge but no per-ClusterQueue metrics", u.Feature)
			}
			continue
		}
		all, counts := q.QueueMetrics(func(names ...string) []string { return names })
		for _, n := range names(all) {
			if !slices.Contains(names(served), n) {
				t.Errorf("%s's metric %s is not served", u.Feature, n)
			}
		}
		gauge := UnitGauge(u.Feature)
		if (counts == nil) != (gauge == nil) {
			t.Errorf("%s: UnitGauge is %v, want a gauge: %v", u.Feature, gauge, counts != nil)
		}
		if _, counts := u.Plugin.(interface {
			Count(c *policy.Candidate) (string, bool)
		}); counts && gauge == nil {
			t.Errorf("%s counts workloads but has no gauge", u.Feature)
		}
	}
	if diff := cmp.Diff([]string{"kueue_preemption_notices_in_force"}, names([]prometheus.Collector{UnitGauge(notice.Feature)})); diff != "" {
		t.Errorf("the notice's gauge (-want +got):\n%s", diff)
	}
}
