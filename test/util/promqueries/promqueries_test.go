package promqueries

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const scrape = `# HELP kueue_pending_workloads Pending workloads.
# TYPE kueue_pending_workloads gauge
kueue_pending_workloads{cluster_queue="gpu",replica_role="leader",status="active"} 2
kueue_preempted_workloads_total{preempting_cluster_queue="gpu",reason="InClusterQueueTimeBased",replica_role="leader"} 1
kueue_quota_reserved_wait_time_seconds_bucket{cluster_queue="gpu",le="+Inf",priority_class="",replica_role="leader"} 3
controller_runtime_webhook_panics_total 0
kueue_build_info{git_version="v0.1.0+kueue-v0.19.2",git_commit="a \"quoted\" {value}"} 1
`

func TestCheck(t *testing.T) {
	s := Series{}
	if err := s.Add(strings.NewReader(scrape)); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		expr, legend string
		want         []string
	}{
		"a selector with matchers, a range and an aggregation": {
			expr: `sum by (preempting_cluster_queue, reason) (increase(kueue_preempted_workloads_total{reason="InClusterQueueTimeBased",preempting_cluster_queue=~"$cluster_queue"}[1h]))`,
		},
		"a histogram's buckets by le": {
			expr: `histogram_quantile(0.9, sum by (le, cluster_queue) (rate(kueue_quota_reserved_wait_time_seconds_bucket[5m])))`, legend: "{{cluster_queue}} p90",
		},
		"a join, unless, label_replace's strings and vector()": {
			expr: `(sum by (cluster_queue) (kueue_pending_workloads) > 0) unless on (cluster_queue) kueue_pending_workloads or label_replace(sum(controller_runtime_webhook_panics_total) > 0, "webhook", "panic", "", "") or vector(0)`,
		},
		"a label value with braces and quotes in the scrape": {expr: `count by (git_version, git_commit) (kueue_build_info)`},
		"a metric that is not served": {
			expr: `kueue_pending_workload{cluster_queue="gpu"}`,
			want: []string{"q: metric kueue_pending_workload is not served"},
		},
		"a histogram read without its _bucket suffix": {
			expr: `rate(kueue_quota_reserved_wait_time_seconds[5m])`,
			want: []string{"q: metric kueue_quota_reserved_wait_time_seconds is not served"},
		},
		"a matcher on a label the metric does not have": {
			expr: `kueue_pending_workloads{clusterqueue="gpu"}`,
			want: []string{"q: metric kueue_pending_workloads has no label clusterqueue"},
		},
		"grouping by a label no metric has": {
			expr: `sum by (queue) (kueue_pending_workloads)`,
			want: []string{"q: no metric it reads has the label queue (of kueue_pending_workloads)"},
		},
		"a legend naming a label no metric has": {
			expr: `kueue_pending_workloads`, legend: "{{cluster_queue}} {{outcome}}",
			want: []string{"q: no metric it reads has the label outcome (of kueue_pending_workloads)"},
		},
		"no metric at all": {expr: `vector(1)`, want: []string{`q: names no metric: "vector(1)"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Check(Query{Source: "q", Expr: tc.expr, Legend: tc.legend}, s)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// Every query of the chart's dashboard and rules is read, and each names a metric.
func TestLoad(t *testing.T) {
	qs, err := Load(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]bool{}
	for _, q := range qs {
		sources[strings.SplitN(q.Source, " ", 2)[0]] = true
		if len(Check(q, Series{})) == 0 {
			t.Errorf("%s: no problem found against an empty scrape; does it name a metric? %q", q.Source, q.Expr)
		}
	}
	if diff := cmp.Diff(map[string]bool{"dashboard": true, "alert": true}, sources); diff != "" {
		t.Errorf("query sources (-want +got):\n%s", diff)
	}
	if len(qs) < 20 {
		t.Errorf("read %d queries, want the dashboard's and the rules' (at least 20)", len(qs))
	}
}
