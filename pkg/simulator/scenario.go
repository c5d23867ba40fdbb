// Package simulator runs a scenario (queues, priority classes and a stream of workloads with their
// true durations) on a simulated clock through the same admission loop, preemptor and victim
// policy as the kueue-timeshare manager, with the workload life cycle (admission, eviction,
// requeue, completion) that Kueue's controllers and the job controllers would drive emulated in
// process. A day of simulated time takes seconds.
package simulator

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
	sigsyaml "sigs.k8s.io/yaml"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
)

// Scenario is a scenario file, as read: Kueue's objects (Objects, from the file's manifests) and
// the scenario's own document, which says what Kueue has no object for.
type Scenario struct {
	// Name labels the output; the file name when empty.
	Name        string `yaml:"name,omitempty"`
	Description string `yaml:"description,omitempty"`
	// Simulation says when the simulation starts and stops.
	Simulation Simulation `yaml:"simulation,omitempty"`
	// FeatureGates turns kueue-timeshare's feature gates on or off (all on by default).
	FeatureGates map[string]bool `yaml:"featureGates,omitempty"`
	// FairSharing turns fair sharing on, as the manager configuration's fairSharing does.
	FairSharing *FairSharing `yaml:"fairSharing,omitempty"`
	// Timeshare is the manager configuration's timeshare section.
	Timeshare Timeshare  `yaml:"timeshare,omitempty"`
	Workloads []Workload `yaml:"workloads,omitempty"`

	Objects `yaml:"-"`
}

// Simulation bounds the simulated time.
type Simulation struct {
	// Start is the wall-clock time the simulation starts at (shown in timestamps); a fixed date
	// when empty, so that runs are reproducible.
	Start *Time `yaml:"start,omitempty"`
	// Until stops the simulation this long after the start. Default: once every workload has
	// finished, at the latest after the last arrival plus twice the sum of all durations.
	Until *Duration `yaml:"until,omitempty"`
	// SchedulingInterval is how soon the scheduler retries heads that neither fit nor made
	// progress and stayed in the active queue (StrictFIFO heads, for instance). Default 1s.
	SchedulingInterval *Duration `yaml:"schedulingInterval,omitempty"`
}

// FairSharing is the manager configuration's fairSharing; present means enabled.
type FairSharing struct {
	// PreemptionStrategies as in Kueue's configuration; Kueue's default when empty.
	PreemptionStrategies []string `yaml:"preemptionStrategies,omitempty"`
}

// Timeshare is the manager configuration's timeshare section, read by the manager's own decoder.
type Timeshare struct{ tsconfig.Configuration }

// UnmarshalYAML decodes the section as the manager does (tsconfig.Decode); on a problem, each
// field again on its own, to name the line of each one that is wrong.
func (t *Timeshare) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("must be a mapping of fields, not %s", kindName(n))
	}
	raw := map[string]any{}
	if err := n.Decode(&raw); err != nil {
		return err
	}
	data, err := json.Marshal(raw)
	if err == nil {
		if t.Configuration, err = tsconfig.Decode(data); err == nil {
			return nil
		}
	}
	var errs ErrorList
	for i := 0; i+1 < len(n.Content); i += 2 {
		var value any
		_ = n.Content[i+1].Decode(&value)
		one, _ := json.Marshal(map[string]any{n.Content[i].Value: value})
		_, err := tsconfig.Decode(one)
		if err == nil {
			continue
		}
		msg := strings.TrimPrefix(err.Error(), tsconfig.SectionKey+": ")
		if je := (*json.UnmarshalTypeError)(nil); errors.As(err, &je) {
			msg = fmt.Sprintf("%s must be %s, not a %s", je.Field, typeWord(je.Type.String()), je.Value)
		}
		errs = append(errs, &FieldError{Line: n.Content[i+1].Line, Path: n.Content[i].Value, Message: msg})
	}
	return errs
}

// MarshalYAML writes the section with the manager's field names, leaving out what is unset.
func (t Timeshare) MarshalYAML() (any, error) {
	data, err := json.Marshal(t.Configuration)
	out := map[string]any{}
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if m, ok := out["metrics"].(map[string]any); ok && len(m) == 0 {
		delete(out, "metrics")
	}
	return out, err
}

// TimeshareOf is the scenario form of a manager configuration's timeshare section: what a
// simulation reads of it (not runtimeClock, metrics, admissionEstimates or maxHandoverHold, which
// it does not model: its workloads have no Pods to wait for).
func TimeshareOf(c *tsconfig.Configuration) Timeshare {
	t := Timeshare{*c}
	t.RuntimeClock, t.Metrics, t.AdmissionEstimates, t.MaxHandoverHold = "", tsconfig.Metrics{}, tsconfig.AdmissionEstimates{}, nil
	return t
}

// timeshareConfig is the section with the manager's defaults.
func (s *Scenario) timeshareConfig() *tsconfig.Configuration {
	c := s.Timeshare.Configuration
	tsconfig.SetDefaults(&c)
	return &c
}

// Workload is one job, or several identical ones (copies).
type Workload struct {
	Name string `yaml:"name,omitempty"`
	// Arrival is when it is submitted, from the start of the simulation.
	Arrival Duration `yaml:"arrival,omitempty"`
	// Queue names its LocalQueue; or ClusterQueue names its ClusterQueue (through a LocalQueue
	// pointing to it). Exactly one of the two.
	Queue        string `yaml:"queue,omitempty"`
	Namespace    string `yaml:"namespace,omitempty"`
	ClusterQueue string `yaml:"clusterQueue,omitempty"`
	// PriorityClass names a WorkloadPriorityClass or PriorityClass; none means priority 0.
	PriorityClass string `yaml:"priorityClass,omitempty"`
	// Pods is how many pods it runs (default 1); Resources is what each pod asks for.
	Pods      int32               `yaml:"pods,omitempty"`
	Resources map[string]Quantity `yaml:"resources,omitempty"`
	// Duration is the run time it needs to finish.
	Duration Duration `yaml:"duration,omitempty"`
	// Checkpointed workloads keep all their progress when preempted (continuous checkpoints);
	// others resume from their last checkpoint, or start over without one.
	Checkpointed bool `yaml:"checkpointed,omitempty"`
	// CheckpointInterval is the run time between two checkpoints, each of which takes
	// CheckpointDuration; an eviction loses the run time since the last completed one.
	CheckpointInterval *Duration `yaml:"checkpointInterval,omitempty"`
	CheckpointDuration *Duration `yaml:"checkpointDuration,omitempty"`
	// Annotations are the Workload's (kueue-timeshare.io/expected-runtime, ...).
	Annotations map[string]string `yaml:"annotations,omitempty"`
	// Copies submits this many identical workloads, named <name>-1 ... <name>-N, Every apart.
	Copies int       `yaml:"copies,omitempty"`
	Every  *Duration `yaml:"every,omitempty"`
	// Snapshot, for a workload already in the cluster when the simulation starts (a scenario
	// saved from a live cluster), is its state then; it arrives at the start.
	Snapshot *WorkloadSnapshot `yaml:"snapshot,omitempty"`
	// Deactivate plays its owner deactivating it (spec.active false) some time after each
	// admission and reactivating it later, as a tenant may.
	Deactivate *Deactivation `yaml:"deactivate,omitempty"`
}

// Deactivation is when a workload's owner deactivates it and for how long.
type Deactivation struct {
	// AfterAdmission is how long after each admission it is deactivated.
	AfterAdmission Duration `yaml:"afterAdmission"`
	// For is how long it stays inactive before it is reactivated.
	For Duration `yaml:"for"`
}

// Duration is a Go duration ("90s", "1h30m").
type Duration struct{ time.Duration }

// Quantity is a Kubernetes quantity ("1", "500m", "8Gi").
type Quantity struct{ resource.Quantity }

// Time is an RFC 3339 time.
type Time struct{ time.Time }

// scalar reads a scalar node with parse; problem says what a value parse refuses is not.
func scalar(n *yaml.Node, problem string, parse func(string) error) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("must be a single value, not %s", kindName(n))
	}
	if parse(n.Value) != nil {
		return fmt.Errorf("%q is not %s", n.Value, problem)
	}
	return nil
}

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	return scalar(n, "a duration (write it like 90s, 15m or 4h)", func(s string) (err error) { d.Duration, err = time.ParseDuration(s); return })
}

func (q *Quantity) UnmarshalYAML(n *yaml.Node) error {
	return scalar(n, "a quantity (write it like 2, 500m or 8Gi)", func(s string) (err error) { q.Quantity, err = resource.ParseQuantity(s); return })
}

func (t *Time) UnmarshalYAML(n *yaml.Node) error {
	return scalar(n, "an RFC 3339 time (write it like 2026-01-05T09:00:00Z)", func(s string) (err error) { t.Time, err = time.Parse(time.RFC3339, s); return })
}

func (d Duration) MarshalYAML() (any, error) { return FormatDuration(d.Duration), nil }
func (q Quantity) MarshalYAML() (any, error) { return q.String(), nil }
func (t Time) MarshalYAML() (any, error)     { return t.UTC().Format(time.RFC3339), nil }

// FormatDuration writes a duration as time.ParseDuration reads it, without zero parts: 1h, 1h30m,
// 2h5s, 90s.
func FormatDuration(d time.Duration) string {
	s := strings.Replace(d.String(), "h0m", "h", 1)
	if strings.HasSuffix(s, "m0s") || strings.HasSuffix(s, "h0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	return s
}

// Load reads and checks a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(filepath.Base(path), data)
}

// Parse reads and checks a scenario; file names it in messages. Every problem found is returned,
// as an ErrorList, each naming its line and field. The file holds Kueue's manifests
// (ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass, and Kubernetes
// PriorityClass; one per document or in a List), checked as the API server and the manager's
// webhooks check them, and the scenario's own document.
func Parse(file string, data []byte) (*Scenario, error) {
	p := &parser{file: file, lines: map[string]int{}, objects: map[string]*yaml.Node{}}
	s := &Scenario{}
	manifests := p.read(data, s)
	if len(p.errs) == 0 {
		p.addManifests(s, manifests)
	}
	if len(p.errs) == 0 {
		s.complete()
		p.validate(s)
	}
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *FieldError) int { return cmp.Compare(a.Line, b.Line) })
		return nil, p.errs
	}
	s.Name = cmp.Or(s.Name, file)
	return s, nil
}

// Encode writes the scenario as Parse reads it: its objects as Kueue's manifests, one YAML
// document each, then its own document (unset and zero fields left out).
func (s *Scenario) Encode() ([]byte, error) {
	var b bytes.Buffer
	for _, o := range s.Objects.all() {
		data, err := sigsyaml.Marshal(withoutEmptyMeta(o))
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(data)
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	b.WriteString("---\n")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return b.Bytes(), enc.Close()
}
