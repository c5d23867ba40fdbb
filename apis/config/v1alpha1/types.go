package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	kjson "sigs.k8s.io/json"

	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
)

// SectionKey is the top-level key of the configuration file that holds Configuration.
const SectionKey = "timeshare"

// ReclaimResolveMethod says where a reclaim victim's protection is looked up.
type ReclaimResolveMethod string

const (
	// ReclaimResolveLCA starts one level below the lowest common ancestor cohort of the two
	// ClusterQueues, on the victim's side, and walks up.
	ReclaimResolveLCA ReclaimResolveMethod = "LCA"
	// ReclaimResolveQueue starts at the victim's ClusterQueue and walks up.
	ReclaimResolveQueue ReclaimResolveMethod = "Queue"
)

// DefaultRequeueDelay is the cooldown after an expected-runtime requeue when neither the workload
// nor the configuration sets one.
const DefaultRequeueDelay = 10 * time.Minute

// Configuration is the `timeshare` section of the manager's configuration file. Unset fields take
// the defaults of SetDefaults.
type Configuration struct {
	// DefaultPreemptMinRuntime protects a workload from preemption within its own ClusterQueue
	// when neither its ClusterQueue nor any ancestor cohort sets preemptMinRuntime. 0s: none.
	DefaultPreemptMinRuntime *metav1.Duration `json:"defaultPreemptMinRuntime,omitempty"`
	// DefaultReclaimMinRuntime protects a workload from reclaim by another ClusterQueue when no
	// queue on the resolution path sets reclaimMinRuntime. 0s: none.
	DefaultReclaimMinRuntime *metav1.Duration `json:"defaultReclaimMinRuntime,omitempty"`
	// ReclaimResolveMethod is LCA (default) or Queue.
	ReclaimResolveMethod ReclaimResolveMethod `json:"reclaimResolveMethod,omitempty"`
	// DefaultRequeueDelay is the expected-runtime cooldown when a workload does not set one.
	DefaultRequeueDelay *metav1.Duration `json:"defaultRequeueDelay,omitempty"`
	// RuntimeClock is the condition from which min-runtimes and expected runtimes count a
	// workload's running time: Admitted (default) or PodsReady (needs waitForPodsReady, which
	// maintains that condition).
	RuntimeClock RuntimeClock `json:"runtimeClock,omitempty"`
	// DefaultNoticePeriod is the notice a victim gets before its eviction when neither its
	// ClusterQueue nor any ancestor cohort sets noticePeriod. 0s: none. Accepted only with the
	// PreemptionNotice feature gate.
	DefaultNoticePeriod *metav1.Duration `json:"defaultNoticePeriod,omitempty"`
	// HeadsPerCycle is how many workloads of one ClusterQueue a scheduling cycle may admit: after
	// its head is admitted, a ClusterQueue gives its next workload, on the same snapshot, up to
	// this many. 1 (default) is upstream's loop; waitForPodsReady.blockAdmission forces 1.
	HeadsPerCycle *int32 `json:"headsPerCycle,omitempty"`
	// PendingStatusWriters is how many workers write the pending status of heads that wait, off
	// the scheduling cycle's path, through the manager's client. 0 writes it inside the cycle,
	// as upstream's loop.
	PendingStatusWriters *int32 `json:"pendingStatusWriters,omitempty"`
	// MaxHandoverHold bounds how long, under the HandoverAfterVictimTermination feature gate, a
	// victim of a turn or an expected runtime keeps its quota while its Pods terminate: the hold
	// lasts the Pods' termination grace period, which the tenant's Job sets, up to this bound.
	MaxHandoverHold *metav1.Duration `json:"maxHandoverHold,omitempty"`
	// PreemptionBudget is the budget of each ClusterQueue with none on its path (its own bucket
	// per ClusterQueue). Accepted only with the PreemptionBudget feature gate.
	PreemptionBudget *tsapi.PreemptionBudget `json:"preemptionBudget,omitempty"`
	// AdmissionEstimates holds when the manager computes admission estimates; left out of a
	// scenario the simulator saves while unset.
	AdmissionEstimates AdmissionEstimates `json:"admissionEstimates,omitzero"`
	// Metrics holds the settings of our own metrics (Kueue's are in its top-level metrics).
	Metrics Metrics `json:"metrics"`
}

// DefaultEstimateRefreshInterval gives a workload that waits longer than a few seconds its
// estimate, at a bounded cost: see docs/admission-estimate.md.
const DefaultEstimateRefreshInterval = 5 * time.Second

// AdmissionEstimates is the `timeshare.admissionEstimates` section.
type AdmissionEstimates struct {
	// RefreshInterval is how often the replica that schedules computes the estimates of the
	// ClusterQueues whose pending workloads changed, so that a waiting workload has one (and the
	// error metric a sample) without anyone asking. 0s: only when the visibility API asks.
	RefreshInterval *metav1.Duration `json:"refreshInterval,omitempty"`
}

// DefaultHeadsPerCycle is one head per ClusterQueue per cycle, as upstream's loop; MaxHeadsPerCycle
// bounds a cycle's length.
const (
	DefaultHeadsPerCycle = 1
	MaxHeadsPerCycle     = 1000
)

// DefaultPendingStatusWriters is upstream's loop (writes inside the cycle): on upstream's baseline
// load, writers at 4 ran many more empty cycles and evictions (docs/performance.md).
// MaxPendingStatusWriters bounds what they take of the client's rate limit, which admissions share.
const (
	DefaultPendingStatusWriters = 0
	MaxPendingStatusWriters     = 64
)

// DefaultMaxHandoverHold is the bound of a handover hold when the configuration does not say: ten
// times Kubernetes' default grace period, time for a checkpoint; MaxMaxHandoverHold the largest
// bound accepted.
const (
	DefaultMaxHandoverHold = 5 * time.Minute
	MaxMaxHandoverHold     = 24 * time.Hour
)

// DefaultLongWaitThreshold is the wait past which a pending workload counts as waiting long when
// the configuration does not say.
const DefaultLongWaitThreshold = time.Hour

// Metrics is the `timeshare.metrics` section.
type Metrics struct {
	// LongWaitThreshold is the wait past which a pending workload counts in the
	// *_pending_workloads_waiting_longer_than_threshold gauges. 0s: no such gauges.
	LongWaitThreshold *metav1.Duration `json:"longWaitThreshold,omitempty"`
}

// RuntimeClock names the condition running time is counted from.
type RuntimeClock string

const (
	// RuntimeClockAdmitted counts from the Admitted condition: quota reserved and checks passed.
	RuntimeClockAdmitted RuntimeClock = "Admitted"
	// RuntimeClockPodsReady counts from the PodsReady condition: every Pod is running and ready.
	RuntimeClockPodsReady RuntimeClock = "PodsReady"
)

// SetDefaults fills unset fields.
func SetDefaults(c *Configuration) {
	if c.DefaultPreemptMinRuntime == nil {
		c.DefaultPreemptMinRuntime = &metav1.Duration{}
	}
	if c.DefaultReclaimMinRuntime == nil {
		c.DefaultReclaimMinRuntime = &metav1.Duration{}
	}
	if c.ReclaimResolveMethod == "" {
		c.ReclaimResolveMethod = ReclaimResolveLCA
	}
	if c.DefaultRequeueDelay == nil {
		c.DefaultRequeueDelay = &metav1.Duration{Duration: DefaultRequeueDelay}
	}
	if c.RuntimeClock == "" {
		c.RuntimeClock = RuntimeClockAdmitted
	}
	if c.DefaultNoticePeriod == nil {
		c.DefaultNoticePeriod = &metav1.Duration{}
	}
	if c.HeadsPerCycle == nil {
		c.HeadsPerCycle = ptr.To[int32](DefaultHeadsPerCycle)
	}
	if c.PendingStatusWriters == nil {
		c.PendingStatusWriters = ptr.To[int32](DefaultPendingStatusWriters)
	}
	if c.MaxHandoverHold == nil {
		c.MaxHandoverHold = &metav1.Duration{Duration: DefaultMaxHandoverHold}
	}
	if c.AdmissionEstimates.RefreshInterval == nil {
		c.AdmissionEstimates.RefreshInterval = &metav1.Duration{Duration: DefaultEstimateRefreshInterval}
	}
	if c.Metrics.LongWaitThreshold == nil {
		c.Metrics.LongWaitThreshold = &metav1.Duration{Duration: DefaultLongWaitThreshold}
	}
}

// Validate checks a defaulted Configuration; paths start at the section key.
func Validate(c *Configuration) field.ErrorList {
	path := field.NewPath(SectionKey)
	var errs field.ErrorList
	nonNegative := func(name string, d *metav1.Duration, more ...string) {
		if d != nil && d.Duration < 0 {
			errs = append(errs, field.Invalid(path.Child(name, more...), d.Duration.String(), "must not be negative"))
		}
	}
	nonNegative("defaultPreemptMinRuntime", c.DefaultPreemptMinRuntime)
	nonNegative("defaultReclaimMinRuntime", c.DefaultReclaimMinRuntime)
	nonNegative("defaultRequeueDelay", c.DefaultRequeueDelay)
	nonNegative("defaultNoticePeriod", c.DefaultNoticePeriod)
	nonNegative("admissionEstimates", c.AdmissionEstimates.RefreshInterval, "refreshInterval")
	nonNegative("metrics", c.Metrics.LongWaitThreshold, "longWaitThreshold")
	if d := c.DefaultNoticePeriod; d != nil && d.Duration > tsapi.MaximumNoticePeriod {
		errs = append(errs, field.Invalid(path.Child("defaultNoticePeriod"), d.Duration.String(), fmt.Sprintf("must be at most %s", tsapi.MaximumNoticePeriod)))
	}
	nonNegative("maxHandoverHold", c.MaxHandoverHold)
	if d := c.MaxHandoverHold; d != nil && d.Duration > MaxMaxHandoverHold {
		errs = append(errs, field.Invalid(path.Child("maxHandoverHold"), d.Duration.String(), fmt.Sprintf("must be at most %s", MaxMaxHandoverHold)))
	}
	if n := c.HeadsPerCycle; n != nil && (*n < 1 || *n > MaxHeadsPerCycle) {
		errs = append(errs, field.Invalid(path.Child("headsPerCycle"), *n, fmt.Sprintf("must be between 1 and %d", MaxHeadsPerCycle)))
	}
	if n := c.PendingStatusWriters; n != nil && (*n < 0 || *n > MaxPendingStatusWriters) {
		errs = append(errs, field.Invalid(path.Child("pendingStatusWriters"), *n, fmt.Sprintf("must be between 0 and %d", MaxPendingStatusWriters)))
	}
	errs = append(errs, c.PreemptionBudget.Validate(path.Child("preemptionBudget"))...)
	switch c.ReclaimResolveMethod {
	case ReclaimResolveLCA, ReclaimResolveQueue:
	default:
		errs = append(errs, field.NotSupported(path.Child("reclaimResolveMethod"), c.ReclaimResolveMethod,
			[]ReclaimResolveMethod{ReclaimResolveLCA, ReclaimResolveQueue}))
	}
	switch c.RuntimeClock {
	case RuntimeClockAdmitted, RuntimeClockPodsReady:
	default:
		errs = append(errs, field.NotSupported(path.Child("runtimeClock"), c.RuntimeClock,
			[]RuntimeClock{RuntimeClockAdmitted, RuntimeClockPodsReady}))
	}
	return errs
}

// Decode reads the section strictly: unknown fields are errors that name them.
func Decode(raw json.RawMessage) (Configuration, error) {
	var c Configuration
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return c, nil
	}
	// Case-sensitive, as the API server reads our CRD fields.
	strict, err := kjson.UnmarshalStrict(raw, &c)
	if err != nil {
		return c, fmt.Errorf("%s: %w", SectionKey, err)
	}
	if len(strict) > 0 {
		return c, fmt.Errorf("%s: %w", SectionKey, errors.Join(strict...))
	}
	return c, nil
}
