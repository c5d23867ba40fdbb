package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	yaml3 "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
)

// WhatIfReport is what `what-if` shows: the same snapshot run forward with the current and the
// proposed settings.
type WhatIfReport struct {
	// Now is when the snapshot was taken; the simulations start there.
	Now metav1.Time `json:"now"`
	// ForSeconds is how far ahead they run.
	ForSeconds float64 `json:"forSeconds"`
	// Proposed lists what the proposal changes.
	Proposed      []string         `json:"proposed"`
	ClusterQueues []WhatIfQueue    `json:"clusterQueues"`
	Workloads     []WhatIfWorkload `json:"workloads"`
	// FirstDifference is where the two runs' decisions part, from that decision on; nil when
	// they make the same decisions.
	FirstDifference *Divergence `json:"firstDifference"`
	// Notes say what the simulation leaves out or assumes.
	Notes []string `json:"notes,omitempty"`
}

// WhatIfQueue compares one ClusterQueue.
type WhatIfQueue struct {
	Name     string       `json:"name"`
	Current  QueueOutcome `json:"current"`
	Proposed QueueOutcome `json:"proposed"`
}

// QueueOutcome is how a ClusterQueue's workloads fared in one run.
type QueueOutcome struct {
	Workloads int `json:"workloads"`
	Finished  int `json:"finished"`
	// Jain is Jain's fairness index over the workloads' capacity-time; absent when none got any.
	Jain               *float64 `json:"jain,omitempty"`
	WaitP50Seconds     float64  `json:"waitP50Seconds"`
	WaitMaxSeconds     float64  `json:"waitMaxSeconds"`
	LongestWaitSeconds float64  `json:"longestWaitSeconds"`
	Preemptions        int      `json:"preemptions"`
	// NextAdmitted is the first workload the run admits after the snapshot; nil if none.
	NextAdmitted *SimDecision `json:"nextAdmitted,omitempty"`
}

// WhatIfWorkload compares one workload.
type WhatIfWorkload struct {
	Namespace    string `json:"namespace"`
	Name         string `json:"name"`
	ClusterQueue string `json:"clusterQueue"`
	// RuntimeSeconds is the run time it was given, and RuntimeSource where it comes from.
	RuntimeSeconds float64         `json:"runtimeSeconds"`
	RuntimeSource  string          `json:"runtimeSource"`
	Current        WorkloadOutcome `json:"current"`
	Proposed       WorkloadOutcome `json:"proposed"`
}

// WorkloadOutcome is how a workload fared in one run. Waits include the time it had already
// waited when the snapshot was taken.
type WorkloadOutcome struct {
	TotalWaitSeconds   float64      `json:"totalWaitSeconds"`
	LongestWaitSeconds float64      `json:"longestWaitSeconds"`
	Preemptions        int          `json:"preemptions"`
	FinishedAt         *metav1.Time `json:"finishedAt,omitempty"`
}

// SimDecision is one admission, preemption, eviction or completion of a run.
type SimDecision struct {
	At           metav1.Time `json:"at"`
	Kind         string      `json:"kind"`
	Workload     string      `json:"workload"`
	ClusterQueue string      `json:"clusterQueue"`
	Reason       string      `json:"reason,omitempty"`
	By           string      `json:"by,omitempty"`
}

// Divergence is the decisions of both runs from the first one that differs.
type Divergence struct {
	Current  []SimDecision `json:"current"`
	Proposed []SimDecision `json:"proposed"`
}

// Proposal is what a proposed file changes.
type Proposal struct {
	ClusterQueues []*unstructured.Unstructured
	Cohorts       []*unstructured.Unstructured
	// Manager is the proposed manager configuration, when the file holds one.
	Manager *ManagerSettings
}

// ReadProposal reads a proposed file: ClusterQueue and Cohort manifests and at most one manager
// Configuration, as YAML documents or a List. Each manifest is checked by the webhooks' own
// validation; the error names the document, the object and the field.
func ReadProposal(name string, data []byte) (*Proposal, error) {
	p := &Proposal{}
	dec := yaml3.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		var node yaml3.Node
		if err := dec.Decode(&node); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var raw map[string]any
		if err := node.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, doc, err)
		}
		if raw == nil {
			continue
		}
		items := []map[string]any{raw}
		if raw["kind"] == "List" {
			items = nil
			list, _ := raw["items"].([]any)
			for _, it := range list {
				m, ok := it.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("%s: document %d: items must be objects", name, doc)
				}
				items = append(items, m)
			}
		}
		for _, item := range items {
			if err := p.add(name, doc, item); err != nil {
				return nil, err
			}
		}
	}
	if len(p.ClusterQueues)+len(p.Cohorts) == 0 && p.Manager == nil {
		return nil, fmt.Errorf("%s: proposes nothing: expected ClusterQueue or Cohort manifests (%s) or a manager Configuration with a timeshare section", name, kueue.SchemeGroupVersion)
	}
	return p, nil
}

func (p *Proposal) add(file string, doc int, obj map[string]any) error {
	// Through JSON, so that numbers and nested maps have the types the API machinery expects.
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("%s: document %d: %w", file, doc, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		return fmt.Errorf("%s: document %d: %w", file, doc, err)
	}
	where := fmt.Sprintf("%s: document %d (%s %s)", file, doc, u.GetKind(), u.GetName())
	gv := u.GroupVersionKind().GroupVersion()
	switch {
	case u.GetKind() == "Configuration" && gv.Group == "config.kueue.x-k8s.io":
		if p.Manager != nil {
			return fmt.Errorf("%s: a second manager Configuration", where)
		}
		m, err := parseManagerSettings(data)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		p.Manager = &m
		return nil
	case gv != kueue.SchemeGroupVersion:
		return fmt.Errorf("%s: apiVersion %q kind %q cannot be proposed: use ClusterQueue or Cohort of %s, or a manager Configuration", where, u.GetAPIVersion(), u.GetKind(), kueue.SchemeGroupVersion)
	}
	if u.GetName() == "" {
		return fmt.Errorf("%s: metadata.name: Required value", where)
	}
	if u.GetKind() == "ClusterQueue" || u.GetKind() == "Cohort" {
		if _, problems, _ := simulator.DecodeManifest(u); len(problems) > 0 {
			msgs := make([]string, 0, len(problems))
			for _, p := range problems {
				msgs = append(msgs, strings.TrimPrefix(p.Field+": "+p.Message, ": "))
			}
			return fmt.Errorf("%s: %s", where, strings.Join(msgs, "; "))
		}
	}
	switch u.GetKind() {
	case "ClusterQueue":
		if err := simulator.ValidateClusterQueueObject(u); err != nil {
			return fmt.Errorf("%s: the ClusterQueue webhook would reject it: %w", where, err)
		}
		p.ClusterQueues = append(p.ClusterQueues, u)
	case "Cohort":
		if err := simulator.ValidateCohortObject(u); err != nil {
			return fmt.Errorf("%s: the Cohort webhook would reject it: %w", where, err)
		}
		p.Cohorts = append(p.Cohorts, u)
	default:
		return fmt.Errorf("%s: kind %q cannot be proposed: use ClusterQueue or Cohort", where, u.GetKind())
	}
	return nil
}

// Changes lists what the proposal changes, for the report.
func (p *Proposal) Changes() []string {
	var out []string
	for _, u := range p.ClusterQueues {
		out = append(out, "ClusterQueue "+u.GetName())
	}
	for _, u := range p.Cohorts {
		out = append(out, "Cohort "+u.GetName())
	}
	if p.Manager != nil {
		out = append(out, "the manager configuration's timeshare section and feature gates")
	}
	return out
}

// apply returns the scenario with the proposal in force. A proposed ClusterQueue must exist:
// no workload of the snapshot could be queued in a new one.
func (p *Proposal) apply(file string, current *simulator.Scenario) (*simulator.Scenario, error) {
	data, err := current.Encode()
	if err != nil {
		return nil, err
	}
	out, err := simulator.Parse("proposed", data)
	if err != nil {
		return nil, err
	}
	for _, u := range p.ClusterQueues {
		i := slices.IndexFunc(out.ClusterQueues, func(c *unstructured.Unstructured) bool { return c.GetName() == u.GetName() })
		if i < 0 {
			return nil, fmt.Errorf("%s: ClusterQueue %q is not in the cluster; what-if compares changes to existing ClusterQueues (known: %s)", file, u.GetName(), strings.Join(clusterQueueNames(out), ", "))
		}
		out.ClusterQueues[i] = simulatedClusterQueue(u)
	}
	for _, u := range p.Cohorts {
		if i := slices.IndexFunc(out.Cohorts, func(c *unstructured.Unstructured) bool { return c.GetName() == u.GetName() }); i >= 0 {
			out.Cohorts[i] = specOnly(u)
		} else {
			out.Cohorts = append(out.Cohorts, specOnly(u))
		}
	}
	if m := p.Manager; m != nil {
		c := m.Config
		out.Timeshare = simulator.TimeshareOf(&c)
		for g, on := range m.FeatureGates {
			if slices.Contains(simulator.ScenarioGates(), g) {
				if out.FeatureGates == nil {
					out.FeatureGates = map[string]bool{}
				}
				out.FeatureGates[g] = on
			}
		}
	}
	// Checked as a scenario: a proposal may name flavors or Cohorts the cluster does not have.
	data, err = out.Encode()
	if err != nil {
		return nil, err
	}
	checked, err := simulator.Parse(file, data)
	if err != nil {
		var list simulator.ErrorList
		if !errors.As(err, &list) {
			return nil, err
		}
		problems := make([]string, 0, len(list))
		for _, e := range list {
			problems = append(problems, e.Path+": "+e.Message)
		}
		return nil, fmt.Errorf("%s: the proposal does not fit the cluster: %s", file, strings.Join(problems, "; "))
	}
	return checked, nil
}

func clusterQueueNames(s *simulator.Scenario) []string {
	var out []string
	for _, cq := range s.ClusterQueues {
		out = append(out, cq.GetName())
	}
	return out
}

// whatIfFlags are the what-if command's own flags.
type whatIfFlags struct {
	file          string
	horizon       time.Duration
	assumeRuntime time.Duration
	saveScenario  string
}

// whatIf takes the snapshot, runs both settings and compares them; only limits the output to one
// ClusterQueue.
func (e *env) whatIf(ctx context.Context, f whatIfFlags, only string) (*WhatIfReport, error) {
	if f.file == "" {
		return nil, errors.New("-f PROPOSED.yaml is required: the ClusterQueue or Cohort manifests, or the manager configuration, to compare with today's")
	}
	if f.horizon <= 0 {
		return nil, fmt.Errorf("--for must be positive, not %s", f.horizon)
	}
	if f.assumeRuntime < 0 {
		return nil, fmt.Errorf("--assume-runtime must not be negative, not %s", f.assumeRuntime)
	}
	data, err := os.ReadFile(f.file)
	if err != nil {
		return nil, err
	}
	name := filepath.Base(f.file)
	proposal, err := ReadProposal(name, data)
	if err != nil {
		return nil, err
	}
	snap, err := readSnapshot(ctx, e.client, e.now)
	if err != nil {
		return nil, err
	}
	inCluster := func(name string) bool {
		return slices.ContainsFunc(snap.ClusterQueues, func(u unstructured.Unstructured) bool { return u.GetName() == name })
	}
	if only != "" && !inCluster(only) {
		return nil, fmt.Errorf("ClusterQueue %q not found", only)
	}
	for _, u := range proposal.ClusterQueues {
		if !inCluster(u.GetName()) {
			var names []string
			for _, cq := range snap.ClusterQueues {
				names = append(names, cq.GetName())
			}
			return nil, fmt.Errorf("%s: ClusterQueue %q is not in the cluster; what-if compares changes to existing ClusterQueues (there: %s)", name, u.GetName(), strings.Join(names, ", "))
		}
	}
	built, err := BuildScenario(snap, ScenarioOptions{For: f.horizon, AssumeRuntime: f.assumeRuntime, Manager: e.manager})
	if err != nil {
		return nil, err
	}
	// What --save-scenario writes is what runs: Kueue's manifests and the workloads.
	saved, err := built.Scenario.Encode()
	if err != nil {
		return nil, err
	}
	current, err := simulator.Parse("snapshot", saved)
	if err != nil {
		return nil, fmt.Errorf("the snapshot does not make a valid scenario:\n%w", err)
	}
	if f.saveScenario != "" {
		if err := os.WriteFile(f.saveScenario, saved, 0o644); err != nil {
			return nil, fmt.Errorf("--save-scenario: %w", err)
		}
	}
	proposed, err := proposal.apply(name, current)
	if err != nil {
		return nil, err
	}
	cur, err := simulator.Run(ctx, current, simulator.Options{})
	if err != nil {
		return nil, fmt.Errorf("simulating the current settings: %w", err)
	}
	prop, err := simulator.Run(ctx, proposed, simulator.Options{})
	if err != nil {
		return nil, fmt.Errorf("simulating the proposed settings: %w", err)
	}
	rep := compareRuns(f.horizon, built, cur, prop, only)
	rep.Proposed = proposal.Changes()
	return rep, nil
}

// compareRuns puts two runs of one snapshot side by side.
func compareRuns(horizon time.Duration, built *SnapshotScenario, cur, prop *simulator.Result, only string) *WhatIfReport {
	start := built.Scenario.Simulation.Start.Time
	rep := &WhatIfReport{Now: metav1.NewTime(start), ForSeconds: horizon.Seconds(), ClusterQueues: []WhatIfQueue{}, Workloads: []WhatIfWorkload{}}
	at := func(d time.Duration) metav1.Time { return metav1.NewTime(start.Add(d)) }
	holders := map[string]bool{}
	for _, w := range built.Scenario.Workloads {
		if w.Snapshot != nil && w.Snapshot.QuotaReserved != nil {
			holders[w.Name] = true
		}
	}
	for _, q := range cur.ClusterQueues {
		if only != "" && q.Name != only {
			continue
		}
		rep.ClusterQueues = append(rep.ClusterQueues, WhatIfQueue{Name: q.Name,
			Current: queueOutcome(q, cur, holders, at), Proposed: queueOutcome(findQueue(prop, q.Name), prop, holders, at)})
	}
	for _, w := range cur.Workloads {
		if only != "" && w.ClusterQueue != only {
			continue
		}
		rt := built.Runtimes[w.Namespace+"/"+w.Name]
		ww := WhatIfWorkload{Namespace: w.Namespace, Name: w.Name, ClusterQueue: w.ClusterQueue,
			RuntimeSeconds: rt.Runtime.Seconds(), RuntimeSource: rt.Source, Current: workloadOutcome(&w, at)}
		for i := range prop.Workloads {
			if p := &prop.Workloads[i]; p.Name == w.Name && p.Namespace == w.Namespace {
				ww.Proposed = workloadOutcome(p, at)
			}
		}
		rep.Workloads = append(rep.Workloads, ww)
	}
	a, b := decisions(cur, only, holders, at), decisions(prop, only, holders, at)
	for i := 0; i < len(a) || i < len(b); i++ {
		if i < len(a) && i < len(b) && sameDecision(a[i], b[i]) {
			continue
		}
		const shown = 5
		rep.FirstDifference = &Divergence{Current: a[i:min(len(a), i+shown)], Proposed: b[min(i, len(b)):min(len(b), i+shown)]}
		break
	}
	rep.Notes = append(rep.Notes, built.Notes...)
	for _, n := range cur.Notes {
		rep.Notes = append(rep.Notes, "current: "+n)
	}
	for _, n := range prop.Notes {
		rep.Notes = append(rep.Notes, "proposed: "+n)
	}
	return rep
}

func sameDecision(a, b SimDecision) bool {
	return a.At.Equal(&b.At) && a.Kind == b.Kind && a.Workload == b.Workload && a.Reason == b.Reason && a.By == b.By
}

func findQueue(r *simulator.Result, name string) simulator.QueueResult {
	for _, q := range r.ClusterQueues {
		if q.Name == name {
			return q
		}
	}
	return simulator.QueueResult{Name: name, Jain: math.NaN()}
}

// decisions are a run's admissions, preemptions, evictions and completions after the start.
// holders are the workloads holding quota at the start: their first admission is their past
// reservation.
func decisions(r *simulator.Result, only string, holders map[string]bool, at func(time.Duration) metav1.Time) []SimDecision {
	out := []SimDecision{}
	past := map[string]bool{}
	for _, e := range r.Events {
		if e.Kind == simulator.EventAdmitted && holders[e.Workload] && !past[e.Workload] {
			past[e.Workload] = true
			continue
		}
		if e.Kind == simulator.EventArrived || e.At < 0 || (only != "" && e.ClusterQueue != only) {
			continue
		}
		out = append(out, SimDecision{At: at(e.At), Kind: string(e.Kind), Workload: e.Workload, ClusterQueue: e.ClusterQueue, Reason: e.Reason, By: e.By})
	}
	return out
}

// queueOutcome sums up a ClusterQueue in one run.
func queueOutcome(q simulator.QueueResult, r *simulator.Result, holders map[string]bool, at func(time.Duration) metav1.Time) QueueOutcome {
	o := QueueOutcome{Workloads: q.Workloads, Finished: q.Finished, WaitP50Seconds: q.WaitP50.Seconds(), WaitMaxSeconds: q.WaitMax.Seconds(),
		LongestWaitSeconds: q.LongestWait.Seconds(), Preemptions: q.Preemptions}
	if !math.IsNaN(q.Jain) {
		j := q.Jain
		o.Jain = &j
	}
	for _, d := range decisions(r, q.Name, holders, at) {
		if d.Kind == string(simulator.EventAdmitted) {
			o.NextAdmitted = &d
			break
		}
	}
	return o
}

func workloadOutcome(w *simulator.WorkloadResult, at func(time.Duration) metav1.Time) WorkloadOutcome {
	o := WorkloadOutcome{TotalWaitSeconds: w.TotalWait.Seconds(), LongestWaitSeconds: w.LongestWait.Seconds(), Preemptions: w.PreemptionCount()}
	if w.Finished {
		t := at(w.FinishedAt)
		o.FinishedAt = &t
	}
	return o
}

// RenderWhatIf writes the comparison as tables; cells show current / proposed.
func RenderWhatIf(w io.Writer, r *WhatIfReport, wide bool) error {
	fmt.Fprintf(w, "What-if from %s for %s: current / proposed (%s)\n", r.Now.UTC().Format(time.RFC3339), shortDur(time.Duration(r.ForSeconds*float64(time.Second))), strings.Join(r.Proposed, ", "))
	fmt.Fprintln(w)
	t := newTable(w)
	fmt.Fprintln(t, "CLUSTERQUEUE\tWORKLOADS\tFINISHED\tJAIN\tWAIT P50\tWAIT MAX\tLONGEST WAIT\tPREEMPTIONS\tNEXT ADMITTED")
	for _, q := range r.ClusterQueues {
		fmt.Fprintf(t, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", q.Name, q.Current.Workloads,
			pair(fmt.Sprint(q.Current.Finished), fmt.Sprint(q.Proposed.Finished)),
			pair(jainCell(q.Current.Jain), jainCell(q.Proposed.Jain)),
			pair(secs(q.Current.WaitP50Seconds), secs(q.Proposed.WaitP50Seconds)),
			pair(secs(q.Current.WaitMaxSeconds), secs(q.Proposed.WaitMaxSeconds)),
			pair(secs(q.Current.LongestWaitSeconds), secs(q.Proposed.LongestWaitSeconds)),
			pair(fmt.Sprint(q.Current.Preemptions), fmt.Sprint(q.Proposed.Preemptions)),
			pair(nextCell(q.Current.NextAdmitted, r.Now), nextCell(q.Proposed.NextAdmitted, r.Now)))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w)
	header := "WORKLOAD\tCLUSTERQUEUE\tRUNTIME\tRUNTIME FROM\tTOTAL WAIT\tLONGEST WAIT\tPREEMPTIONS\tFINISHED"
	fmt.Fprintln(t, header)
	for _, x := range r.Workloads {
		fmt.Fprintf(t, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", x.Namespace, x.Name, x.ClusterQueue, secs(x.RuntimeSeconds), x.RuntimeSource,
			pair(secs(x.Current.TotalWaitSeconds), secs(x.Proposed.TotalWaitSeconds)),
			pair(secs(x.Current.LongestWaitSeconds), secs(x.Proposed.LongestWaitSeconds)),
			pair(fmt.Sprint(x.Current.Preemptions), fmt.Sprint(x.Proposed.Preemptions)),
			pair(finishedAt(x.Current.FinishedAt, r.Now, wide), finishedAt(x.Proposed.FinishedAt, r.Now, wide)))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if r.FirstDifference == nil {
		fmt.Fprintln(w, "Both make the same decisions.")
	} else {
		fmt.Fprintln(w, "First decisions that differ:")
		t = newTable(w)
		for _, side := range []struct {
			name string
			ds   []SimDecision
		}{{"current", r.FirstDifference.Current}, {"proposed", r.FirstDifference.Proposed}} {
			if len(side.ds) == 0 {
				fmt.Fprintf(t, "  %s\t\tnothing more happens\n", side.name)
			}
			for i, d := range side.ds {
				label := side.name
				if i > 0 {
					label = ""
				}
				fmt.Fprintf(t, "  %s\t%s\t%s\n", label, sinceNow(d.At.Time, r.Now, wide), describeDecision(d))
			}
		}
		if err := t.Flush(); err != nil {
			return err
		}
	}
	if len(r.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.Notes {
			fmt.Fprintf(w, "Note: %s\n", n)
		}
	}
	return nil
}

func describeDecision(d SimDecision) string {
	s := fmt.Sprintf("%s %s in %s", d.Workload, d.Kind, d.ClusterQueue)
	if d.By != "" {
		s += " by " + d.By
	}
	if d.Reason != "" {
		s += " (" + d.Reason + ")"
	}
	return s
}

func pair(a, b string) string { return a + " / " + b }

func jainCell(j *float64) string {
	if j == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *j)
}

func secs(s float64) string { return shortDur(time.Duration(s * float64(time.Second))) }

func nextCell(d *SimDecision, now metav1.Time) string {
	if d == nil {
		return "none"
	}
	return fmt.Sprintf("%s at %s", d.Workload, sinceNow(d.At.Time, now, false))
}

func finishedAt(t *metav1.Time, now metav1.Time, wide bool) string {
	if t == nil {
		return "no"
	}
	return sinceNow(t.Time, now, wide)
}

// sinceNow writes a time of the simulation as an offset from the snapshot (+2h5m), or with wide
// also as a time.
func sinceNow(t time.Time, now metav1.Time, wide bool) string {
	s := "+" + shortDur(t.Sub(now.Time))
	if wide {
		s += " (" + t.UTC().Format(time.RFC3339) + ")"
	}
	return s
}

// shortDur writes d to the second without zero parts: 2h5m, 1m0.001s stays 1m.
func shortDur(d time.Duration) string {
	d = d.Round(time.Second)
	if d == 0 {
		return "0s"
	}
	return simulator.FormatDuration(d)
}

// parseManagerSettings reads a manager configuration's timeshare section and featureGates.
func parseManagerSettings(content []byte) (ManagerSettings, error) {
	doc, err := yaml.YAMLToJSON(content)
	if err != nil {
		return ManagerSettings{}, err
	}
	return managerSettingsFromJSON(doc)
}
