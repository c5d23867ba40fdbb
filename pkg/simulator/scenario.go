// Package simulator runs a scenario (queues, priority classes and a stream of workloads with their
// true durations) on a simulated clock through the same admission loop, preemptor and victim
// policy as the kueue-timeshare manager, with the workload life cycle (admission, eviction,
// requeue, completion) that Kueue's controllers and the job controllers would drive emulated in
// process. A day of simulated time takes seconds.
package simulator

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"time"

	yaml "go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Scenario is a scenario file, as read. Field names follow Kueue's API where there is one.
type Scenario struct {
	// Name labels the output; the file name when empty.
	Name        string `json:"name"`
	Description string `json:"description"`
	// Simulation says when the simulation starts and stops.
	Simulation Simulation `json:"simulation"`
	// FeatureGates turns kueue-timeshare's feature gates on or off (all on by default).
	FeatureGates map[string]bool `json:"featureGates"`
	// FairSharing turns fair sharing on, as the manager configuration's fairSharing does.
	FairSharing *FairSharing `json:"fairSharing"`
	// Timeshare is the manager configuration's timeshare section.
	Timeshare       Timeshare       `json:"timeshare"`
	Flavors         []Flavor        `json:"flavors"`
	Cohorts         []Cohort        `json:"cohorts"`
	ClusterQueues   []ClusterQueue  `json:"clusterQueues"`
	LocalQueues     []LocalQueue    `json:"localQueues"`
	PriorityClasses []PriorityClass `json:"priorityClasses"`
	Workloads       []Workload      `json:"workloads"`

	// file is where the scenario was read from, for messages.
	file string
	// lines maps field paths to their lines, for messages about the scenario as a whole.
	lines map[string]int
}

// Simulation bounds the simulated time.
type Simulation struct {
	// Start is the wall-clock time the simulation starts at (shown in timestamps); a fixed date
	// when empty, so that runs are reproducible.
	Start *Time `json:"start"`
	// Until stops the simulation this long after the start. Default: once every workload has
	// finished, at the latest after the last arrival plus twice the sum of all durations.
	Until *Duration `json:"until"`
	// SchedulingInterval is how soon the scheduler retries heads that neither fit nor made
	// progress and stayed in the active queue (StrictFIFO heads, for instance). Default 1s.
	SchedulingInterval *Duration `json:"schedulingInterval"`
}

// FairSharing is the manager configuration's fairSharing; present means enabled.
type FairSharing struct {
	// PreemptionStrategies as in Kueue's configuration; Kueue's default when empty.
	PreemptionStrategies []string `json:"preemptionStrategies"`
}

// Timeshare is the manager configuration's timeshare section.
type Timeshare struct {
	DefaultPreemptMinRuntime *Duration `json:"defaultPreemptMinRuntime"`
	DefaultReclaimMinRuntime *Duration `json:"defaultReclaimMinRuntime"`
	ReclaimResolveMethod     string    `json:"reclaimResolveMethod"`
	DefaultRequeueDelay      *Duration `json:"defaultRequeueDelay"`
	// DefaultNoticePeriod is the notice a victim gets when no queue above it sets noticePeriod
	// (PreemptionNotice gate).
	DefaultNoticePeriod *Duration `json:"defaultNoticePeriod"`
}

// Flavor is a ResourceFlavor.
type Flavor struct {
	Name string `json:"name"`
}

// Cohort is a Kueue Cohort with kueue-timeshare's min-runtimes.
type Cohort struct {
	Name string `json:"name"`
	// Parent is spec.parentName.
	Parent      string           `json:"parent"`
	Quota       []FlavorQuota    `json:"quota"`
	Preemption  *MinRuntimes     `json:"preemption"`
	FairSharing *FairShareWeight `json:"fairSharing"`
}

// MinRuntimes are a Cohort's spec.preemption.
type MinRuntimes struct {
	PreemptMinRuntime *Duration `json:"preemptMinRuntime"`
	ReclaimMinRuntime *Duration `json:"reclaimMinRuntime"`
	// Notice settings (PreemptionNotice gate).
	NoticePeriod               *Duration `json:"noticePeriod"`
	NoticeOnPriorityPreemption *bool     `json:"noticeOnPriorityPreemption"`
	NoticeOnReclaim            *bool     `json:"noticeOnReclaim"`
}

// FairShareWeight is spec.fairSharing.
type FairShareWeight struct {
	Weight *Quantity `json:"weight"`
}

// ClusterQueue is a Kueue ClusterQueue with kueue-timeshare's fields.
type ClusterQueue struct {
	Name string `json:"name"`
	// Cohort is spec.cohortName.
	Cohort string `json:"cohort"`
	// QueueingStrategy is BestEffortFIFO (default) or StrictFIFO.
	QueueingStrategy string `json:"queueingStrategy"`
	// Quota lists the flavors and their quotas. Flavors that list the same resources form one
	// resource group, in the order they appear.
	Quota       []FlavorQuota    `json:"quota"`
	Preemption  *Preemption      `json:"preemption"`
	FairSharing *FairShareWeight `json:"fairSharing"`
}

// FlavorQuota is one flavor of a resource group.
type FlavorQuota struct {
	Flavor string `json:"flavor"`
	// Resources maps a resource name to its quota: a quantity (the nominal quota) or a mapping
	// with nominal, borrowingLimit and lendingLimit.
	Resources map[string]ResourceQuota `json:"resources"`
}

// ResourceQuota is one resource's quota in one flavor.
type ResourceQuota struct {
	Nominal        Quantity  `json:"nominal"`
	BorrowingLimit *Quantity `json:"borrowingLimit"`
	LendingLimit   *Quantity `json:"lendingLimit"`
}

// Preemption is spec.preemption with kueue-timeshare's fields.
type Preemption struct {
	WithinClusterQueue       string                    `json:"withinClusterQueue"`
	ReclaimWithinCohort      string                    `json:"reclaimWithinCohort"`
	BorrowWithinCohort       *BorrowWithinCohort       `json:"borrowWithinCohort"`
	WithinClusterQueueConfig *WithinClusterQueueConfig `json:"withinClusterQueueConfig"`
	PreemptMinRuntime        *Duration                 `json:"preemptMinRuntime"`
	ReclaimMinRuntime        *Duration                 `json:"reclaimMinRuntime"`
	// Notice settings (PreemptionNotice gate).
	NoticePeriod               *Duration `json:"noticePeriod"`
	NoticeOnPriorityPreemption *bool     `json:"noticeOnPriorityPreemption"`
	NoticeOnReclaim            *bool     `json:"noticeOnReclaim"`
}

// BorrowWithinCohort is spec.preemption.borrowWithinCohort.
type BorrowWithinCohort struct {
	Policy               string `json:"policy"`
	MaxPriorityThreshold *int32 `json:"maxPriorityThreshold"`
}

// WithinClusterQueueConfig is spec.preemption.withinClusterQueueConfig (KEP-8522).
type WithinClusterQueueConfig struct {
	MinAdmitDuration *Duration `json:"minAdmitDuration"`
}

// LocalQueue points a namespace's queue to a ClusterQueue. Without any, every ClusterQueue gets a
// LocalQueue of the same name in the namespace "default".
type LocalQueue struct {
	Name string `json:"name"`
	// Namespace defaults to "default".
	Namespace    string `json:"namespace"`
	ClusterQueue string `json:"clusterQueue"`
}

// PriorityClass is a WorkloadPriorityClass (default) or a Kubernetes PriorityClass.
type PriorityClass struct {
	Name string `json:"name"`
	// Kind is WorkloadPriorityClass (default) or PriorityClass.
	Kind  string `json:"kind"`
	Value int32  `json:"value"`
	// Annotations carry the preemption toleration (preemption-toleration.scheduling.x-k8s.io/...).
	Annotations map[string]string `json:"annotations"`
}

// Workload is one job, or several identical ones (copies).
type Workload struct {
	Name string `json:"name"`
	// Arrival is when it is submitted, from the start of the simulation.
	Arrival Duration `json:"arrival"`
	// Queue names its LocalQueue; or ClusterQueue names its ClusterQueue (through a LocalQueue
	// pointing to it). Exactly one of the two.
	Queue        string `json:"queue"`
	Namespace    string `json:"namespace"`
	ClusterQueue string `json:"clusterQueue"`
	// PriorityClass names one of priorityClasses; no priority class means priority 0.
	PriorityClass string `json:"priorityClass"`
	// Pods is how many pods it runs (default 1); Resources is what each pod asks for.
	Pods      int32               `json:"pods"`
	Resources map[string]Quantity `json:"resources"`
	// Duration is the run time it needs to finish.
	Duration Duration `json:"duration"`
	// Checkpointed workloads keep all their progress when preempted (continuous checkpoints);
	// others resume from their last checkpoint, or start over without one.
	Checkpointed bool `json:"checkpointed"`
	// CheckpointInterval is the run time between two checkpoints, each of which takes
	// CheckpointDuration; an eviction loses the run time since the last completed one.
	CheckpointInterval *Duration `json:"checkpointInterval"`
	CheckpointDuration *Duration `json:"checkpointDuration"`
	// Annotations are the Workload's (kueue-timeshare.io/expected-runtime, ...).
	Annotations map[string]string `json:"annotations"`
	// Copies submits this many identical workloads, named <name>-1 ... <name>-N, Every apart.
	Copies int       `json:"copies"`
	Every  *Duration `json:"every"`
	// Snapshot, for a workload already in the cluster when the simulation starts (a scenario
	// saved from a live cluster), is its state then; it arrives at the start.
	Snapshot *WorkloadSnapshot `json:"snapshot"`
}

// Duration is a Go duration ("90s", "1h30m").
type Duration struct{ time.Duration }

func (d *Duration) decodeScalar(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration (write it like 90s, 15m or 4h)", s)
	}
	d.Duration = v
	return nil
}

// Quantity is a Kubernetes quantity ("1", "500m", "8Gi").
type Quantity struct{ resource.Quantity }

func (q *Quantity) decodeScalar(s string) error {
	v, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a quantity (write it like 2, 500m or 8Gi)", s)
	}
	q.Quantity = v
	return nil
}

// Time is an RFC 3339 time.
type Time struct{ time.Time }

func (t *Time) decodeScalar(s string) error {
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("%q is not an RFC 3339 time (write it like 2026-01-05T09:00:00Z)", s)
	}
	t.Time = v
	return nil
}

// decodeNode reads a quota given as a quantity (the nominal quota) or as a mapping.
func (q *ResourceQuota) decodeNode(d *decoder, n *yaml.Node, path string) {
	n = resolve(n)
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		if err := q.Nominal.decodeScalar(n.Value); err != nil {
			d.errorAt(n, path, "%v", err)
		}
		return
	}
	type plain ResourceQuota
	var p plain
	d.decodeStruct(n, path, reflect.ValueOf(&p).Elem())
	*q = ResourceQuota(p)
	if n.Kind == yaml.MappingNode {
		if _, ok := d.lines[child(path, "nominal")]; !ok {
			d.errorAt(n, child(path, "nominal"), "required")
		}
	}
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
// as an ErrorList, each naming its line and field. Besides its own document the file may hold
// Kueue's manifests (ResourceFlavor, Cohort, ClusterQueue, LocalQueue, WorkloadPriorityClass, and
// Kubernetes PriorityClass), one per document or in a List, checked as the API server and the
// manager's webhooks check them.
func Parse(file string, data []byte) (*Scenario, error) {
	d := newDecoder(file)
	s := &Scenario{}
	body, manifests := d.parseDocuments(bytes.NewReader(data))
	if len(d.errs) > 0 {
		return nil, d.errs
	}
	if body != nil {
		d.decode(body, "", reflect.ValueOf(s).Elem())
	}
	d.addManifests(s, manifests)
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool { return d.errs[i].Line < d.errs[j].Line })
		return nil, d.errs
	}
	s.file, s.lines = file, d.lines
	if s.Name == "" {
		s.Name = file
	}
	if errs := s.validate(d); len(errs) > 0 {
		d.nameOrigins(errs)
		return nil, errs
	}
	return s, nil
}
