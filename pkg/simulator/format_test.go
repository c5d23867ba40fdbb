package simulator

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteTableComparesRunsCellByCell(t *testing.T) {
	s := mustParse(t, threeJobs)
	ours, upstream := mustRun(t, s, ModeTimeshare), mustRun(t, s, ModeUpstream)
	var out bytes.Buffer
	if err := WriteTable(&out, ours, upstream); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"Scenario three-jobs, started 2026-01-05T09:00:00Z",
		"Cells show: kueue-timeshare / upstream (features off)",
		// Workload a: waited 4m (and 4ms) with time-sharing and never without; two turns taken from it.
		"a         cq            100       cpu=1  0s       2m30s     4m / 0s",
		"2 / 0        6m30s / 2m30s  33% / 33%",
		// The queue: both runs finish everything; only ours preempts.
		"cq            3          3 / 3     1.00 / 1.00",
		"48.00 / 0.00",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
}

func TestWriteTimeline(t *testing.T) {
	r := mustRun(t, mustParse(t, threeJobs), ModeTimeshare)
	var out bytes.Buffer
	if err := WriteTimeline(&out, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"Timeline (kueue-timeshare)",
		"  +0s     cq  a arrives",
		"  +0s     cq  a is admitted",
		"  +1s     cq  b arrives",
		"  +2s     cq  c arrives",
		"  +1m     cq  a is preempted by b (InClusterQueueTimeBased)",
		"  +1m     cq  b is admitted",
	}
	if diff := cmp.Diff(want, lines[:len(want)]); diff != "" {
		t.Errorf("timeline (-want +got):\n%s", diff)
	}
	if last := lines[len(lines)-1]; last != "  +7m30s  cq  c finishes" {
		t.Errorf("last line %q", last)
	}
}

func TestWriteJSON(t *testing.T) {
	s := mustParse(t, threeJobs)
	var out bytes.Buffer
	if err := WriteJSON(&out, mustRun(t, s, ModeTimeshare), mustRun(t, s, ModeUpstream)); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Runs []struct {
			Mode       string
			EndSeconds float64
			Workloads  []struct {
				Name               string
				LongestWaitSeconds float64
				Preemptions        map[string]int
				FinishedAtSeconds  *float64
				Intervals          []struct {
					FromSeconds, ToSeconds float64
					Admitted               bool
				}
			}
			ClusterQueues []struct {
				Name      string
				JainIndex *float64
			}
			Events []struct {
				AtSeconds float64
				Kind      string
				Workload  string
				Reason    string
				By        string
			}
		}
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 2 || doc.Runs[0].Mode != "timeshare" || doc.Runs[1].Mode != "upstream" {
		t.Fatalf("runs %+v", doc.Runs)
	}
	a := doc.Runs[0].Workloads[0]
	// Each turn starts a millisecond after the window ends.
	if a.Name != "a" || a.LongestWaitSeconds != 120.002 || a.Preemptions["InClusterQueueTimeBased"] != 2 || *a.FinishedAtSeconds != 390.004 {
		t.Errorf("workload a: %+v", a)
	}
	if iv := a.Intervals[0]; iv.FromSeconds != 0 || iv.ToSeconds != 60.001 || !iv.Admitted {
		t.Errorf("a's first interval: %+v", iv)
	}
	if q := doc.Runs[0].ClusterQueues[0]; q.Name != "cq" || q.JainIndex == nil || *q.JainIndex != 1 {
		t.Errorf("queue: %+v", q)
	}
	preempted := doc.Runs[0].Events[4]
	if preempted.AtSeconds != 60.001 || preempted.Kind != "preempted" || preempted.Workload != "a" || preempted.By != "b" || preempted.Reason != "InClusterQueueTimeBased" {
		t.Errorf("fifth event: %+v", preempted)
	}
}

func TestWriteSVG(t *testing.T) {
	s := mustParse(t, threeJobs)
	ours, upstream := mustRun(t, s, ModeTimeshare), mustRun(t, s, ModeUpstream)
	var out bytes.Buffer
	if err := WriteSVG(&out, ours, upstream); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	titles := []string{}
	dec := xml.NewDecoder(&out)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
			if se.Name.Local == "text" {
				var text string
				if err := dec.DecodeElement(&text, &se); err != nil {
					t.Fatal(err)
				}
				titles = append(titles, text)
			}
		}
	}
	// One bar per admitted stretch: 3 per job with time-sharing, 1 without, plus the legend's.
	if got, want := counts["rect"], 1+9+3+1; got != want {
		t.Errorf("%d rect elements, want %d", got, want)
	}
	// A red mark per preemption (6), plus the legend's.
	if got := counts["path"]; got != 7 {
		t.Errorf("%d path elements, want 7", got)
	}
	for _, want := range []string{"three-jobs: kueue-timeshare", "three-jobs: upstream (features off)", "ClusterQueue cq", "+7m"} {
		found := false
		for _, got := range titles {
			found = found || got == want
		}
		if !found {
			t.Errorf("no text %q in %v", want, titles)
		}
	}
}

func TestShortDuration(t *testing.T) {
	cases := map[time.Duration]string{
		0:                               "0s",
		1500 * time.Millisecond:         "1.5s",
		61 * time.Second:                "1m1s",
		4 * time.Hour:                   "4h",
		26*time.Hour + 5*time.Minute:    "1d2h5m",
		-90 * time.Second:               "-1m30s",
		250 * time.Millisecond:          "250ms",
		2*time.Hour + 30*time.Minute:    "2h30m",
		48*time.Hour + 16*time.Second:   "2d16s",
		time.Hour + 100*time.Nanosecond: "1h0.0000001s",
		math.MinInt64:                   "-106751d23h47m16.854775807s",
	}
	for d, want := range cases {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %q, want %q", d, got, want)
		}
	}
}
