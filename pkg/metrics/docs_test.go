package metrics

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// docs/metrics.md must name every metric the manager serves: ours, and every one of the Kueue
// module this project builds against (read from its source, so an upgrade that adds one fails here
// until it is documented).
func TestEveryMetricIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range slices.Concat([]prometheus.Collector{ProtectedCandidates, TurnHolders, NextTurnSeconds, ProtectedWorkloads,
		PendingLongestWait, PendingWaitingLong, EstimateError, AdmissionsWithoutEstimate, LocalQueuePendingLongestWait, LocalQueuePendingWaitingLong}, unitVectors, unitCollectors()) {
		descs := make(chan *prometheus.Desc, 1)
		c.Describe(descs)
		m := regexp.MustCompile(`fqName: "([^"]+)"`).FindStringSubmatch((<-descs).String())
		names = append(names, m[1])
	}
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("locating the kueue module: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(dir)), "pkg", "metrics", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	upstream := regexp.MustCompile(`(?m)^\s*Name:\s*"([a-z_]+)"`).FindAllStringSubmatch(string(src), -1)
	if len(upstream) < 50 {
		t.Fatalf("found %d upstream metrics; the source layout changed", len(upstream))
	}
	for _, m := range upstream {
		names = append(names, "kueue_"+m[1])
	}
	for _, n := range names {
		if !strings.Contains(string(doc), "`"+n+"`") {
			t.Errorf("docs/metrics.md does not describe %s", n)
		}
	}
}

// The Grafana dashboard uses only metrics that docs/metrics.md describes (ours and upstream's),
// and every panel has a query.
func TestDashboardUsesDocumentedMetrics(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "charts", "kueue-timeshare", "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}
	if len(dash.Panels) == 0 {
		t.Fatal("dashboard has no panels")
	}
	metric := regexp.MustCompile(`\bkueue_[a-z_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 || p.Targets[0].Expr == "" {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, name := range metric.FindAllString(q.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if !strings.Contains(string(doc), "`"+base+"`") {
					t.Errorf("panel %q uses %s, which docs/metrics.md does not describe", p.Title, name)
				}
			}
		}
	}
}
