package metrics

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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
	for _, c := range []prometheus.Collector{ProtectedCandidates, ExpectedRuntimeNominations, ExpectedRuntimeNominationsSkipped} {
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
