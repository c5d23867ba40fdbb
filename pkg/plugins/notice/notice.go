package notice

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsapi "github.com/kueue-timeshare/kueue-timeshare/apis/kueue/v1beta2"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// Notice before eviction: a victim whose settings give it a notice is not evicted when chosen. It
// keeps running, told its deadline, and the room it holds stays promised to the preemptor that
// chose it: other preemptors leave it alone, and that preemptor looks for no other victims until
// the notice is due (deadline reached, or the victim says its checkpoint is done), when it evicts
// it with the reason it chose it for.

// Settings are the notice settings of one queue of the tree; unset fields inherit from the
// parent cohort.
type Settings struct {
	Period               policy.Setting
	OnPriorityPreemption Flag
	OnReclaim            Flag
}

// Flag is a boolean that may be unset; unset inherits from the next queue up.
type Flag struct {
	Set   bool
	Value bool
}

// Node is one queue on the path from a victim's ClusterQueue to the root of its cohort tree.
type Node struct {
	// Kind is "ClusterQueue" or "Cohort".
	Kind     string
	Name     string
	Settings Settings
}

// noticeSettingsOf reads the notice settings off a ClusterQueue's or Cohort's extension fields
// (Unit.QueueSettings).
func noticeSettingsOf(ext any) any {
	e, ok := ext.(interface{ Notice() tsapi.NoticeSettings })
	if !ok {
		return nil
	}
	n := e.Notice()
	var out Settings
	if n.NoticePeriod != nil {
		out.Period = policy.Set(n.NoticePeriod.Duration)
	}
	if b := n.NoticeOnPriorityPreemption; b != nil {
		out.OnPriorityPreemption = Flag{Set: true, Value: *b}
	}
	if b := n.NoticeOnReclaim; b != nil {
		out.OnReclaim = Flag{Set: true, Value: *b}
	}
	return out
}

// Path is the notice settings on path, read by the notice's unit, and the manager's default
// period def (a duration, or nil), as Resolve takes them.
func Path(path []policy.QueueNode, def any) ([]Node, time.Duration) {
	out := make([]Node, len(path))
	for i, n := range path {
		s, _ := n.Settings.(Settings)
		out[i] = Node{Kind: n.Kind, Name: n.Name, Settings: s}
	}
	d, _ := def.(time.Duration)
	return out, d
}

// reasonKind sorts preemption reasons by the notice settings that govern them.
type reasonKind int

const (
	noNotice reasonKind = iota
	// turnNotice: preemptions that are turns (ReasonWords.Turn: time-based and expected-runtime),
	// which always get the period.
	turnNotice
	priorityNotice
	reclaimNotice
)

func kindOf(reason string) reasonKind {
	if policy.IsTurn(reason) {
		return turnNotice
	}
	switch reason {
	case kueue.InClusterQueueReason:
		return priorityNotice
	case kueue.InCohortReclamationReason, kueue.InCohortReclaimWhileBorrowingReason, kueue.InCohortFairSharingReason:
		return reclaimNotice
	}
	return noNotice
}

// Resolve is the notice a victim on path gets when preempted for reason: the first
// noticePeriod set from its ClusterQueue up, else def; and zero for a priority preemption or a
// reclaim unless the first noticeOnPriorityPreemption or noticeOnReclaim set on the path is true.
// source names the setting the period came from.
func Resolve(path []Node, reason string, def time.Duration) (period time.Duration, source policy.Source) {
	if on, _ := Extended(path, reason); !on {
		return 0, policy.Source{}
	}
	for _, n := range path {
		if n.Settings.Period.Set {
			return n.Settings.Period.Value, policy.QueueSource("noticePeriod", n.Settings.Period.Value, n.Kind, n.Name)
		}
	}
	return def, policy.DefaultSource("defaultNoticePeriod", def)
}

// Extended reports whether a victim on path preempted for reason gets a notice at all: a
// turn always does, a priority preemption or a reclaim only when the first
// noticeOnPriorityPreemption or noticeOnReclaim set from its ClusterQueue up is true. source says
// what decided it, and is empty when no queue on the path sets the flag.
func Extended(path []Node, reason string) (on bool, source policy.Source) {
	var field string
	var extension func(Settings) Flag
	switch kindOf(reason) {
	case noNotice:
		return false, policy.Source{Note: "no notice for a preemption for " + reason}
	case turnNotice:
		return true, policy.Source{Note: "a turn always gets the notice"}
	case priorityNotice:
		field, extension = "noticeOnPriorityPreemption", func(n Settings) Flag { return n.OnPriorityPreemption }
	case reclaimNotice:
		field, extension = "noticeOnReclaim", func(n Settings) Flag { return n.OnReclaim }
	}
	for _, n := range path {
		if f := extension(n.Settings); f.Set {
			return f.Value, policy.QueueSource(field, f.Value, n.Kind, n.Name)
		}
	}
	return false, policy.Source{}
}

// Feature is notice before eviction.
const Feature policy.Feature = "PreemptionNotice"

// Unit is the preemption notice's unit (plugins.Units). A preemptor given the notice settings (a
// Source) turns it on.
func Unit() policy.Unit {
	return policy.Unit{Feature: Feature, Option: Option, Changes: noticeChanges, Read: readNotice,
		Takes: func(src any) bool { _, ok := src.(Source); return ok }, Delays: periodOf,
		Setup: func(mgr ctrl.Manager, env policy.Env) error {
			return Setup(mgr, env.Clock, env.Wake, env.CustomLabels, env.RoleTracker)
		},
		Plugin: Plugin{},
		Vetoed: func(rule string, in *policy.Input) (string, time.Time, bool) {
			if rule != Rule {
				return "", time.Time{}, false
			}
			n := fact.Of(in.Candidate)
			return "its preemption notice for " + n.PreemptorName(), n.Deadline, true
		},
		Promised:        true,
		Marks:           noticeMark,
		RefusedWhileOff: noticeRefused,
		QueueSettings:   noticeSettingsOf,
		DefaultSettings: func(c *tsconfig.Configuration) any {
			if d := c.DefaultNoticePeriod; d != nil {
				return d.Duration
			}
			return nil
		},
		RefusedConfig: func(c *tsconfig.Configuration) field.ErrorList {
			if d := c.DefaultNoticePeriod; d != nil && d.Duration > 0 {
				return field.ErrorList{field.Forbidden(field.NewPath(tsconfig.SectionKey, "defaultNoticePeriod"), features.NoticeGateOff)}
			}
			return nil
		},
	}
}

// noticeStatus is the notice in force on wl, for a one-line view: until when, for whom, and
// whether its checkpoint is done.
func noticeStatus(wl *kueue.Workload, now time.Time) (string, string) {
	n, err := Read(wl)
	if err != nil || n == nil {
		return "", ""
	}
	detail := fmt.Sprintf("under preemption notice until %s (in %s) for %s", n.Deadline.UTC().Format(time.TimeOnly),
		n.Deadline.Sub(now).Truncate(time.Second), n.PreemptorName())
	key := n.Deadline.UTC().Format(time.RFC3339)
	if annotations.CheckpointIsDone(wl.Annotations) {
		detail += ", checkpoint done"
		key += " checkpoint done"
	}
	return detail, key
}

// noticeGiven is the notice newly copied onto wl's annotations since old, as its job sees it.
func noticeGiven(old, wl *kueue.Workload) (*policy.Warning, error) {
	raw, ok := wl.Annotations[annotations.PreemptionNotice]
	if !ok || (old != nil && old.Annotations[annotations.PreemptionNotice] == raw) {
		return nil, nil
	}
	n, err := Read(wl)
	if err != nil || n == nil {
		return nil, fmt.Errorf("reading the notice: %v", err)
	}
	return &policy.Warning{Until: n.Deadline, By: n.PreemptorUID, Reason: n.Reason}, nil
}

// noticeNotCarried drops a notice from a snapshot: it names its preemptor by the cluster's UID,
// which no simulated workload has, so carried over it would keep the victim from every
// preemptor. The simulation chooses again instead.
func noticeNotCarried(ann map[string]string) (string, []string) {
	var note string
	if _, ok := ann[annotations.PreemptionNotice]; ok {
		note = "is under a preemption notice, which the simulation does not carry: its preemptor chooses again"
	}
	return note, noticeAnnotations
}

// noticeAnnotations are those of a notice: the copy the manager writes, and the victim's answer.
var noticeAnnotations = []string{annotations.PreemptionNotice, annotations.PreemptionDeadline, annotations.CheckpointDone}

// noticeCompared: notices are given only where some period is positive; an extension without
// one gives none.
func noticeCompared(c *tsconfig.Configuration, specs []json.RawMessage) bool {
	positive := c.DefaultNoticePeriod != nil && c.DefaultNoticePeriod.Duration > 0
	for _, spec := range specs {
		n, err := tsapi.ParseNoticeSettings(spec)
		positive = positive || (err == nil && n.NoticePeriod != nil && n.NoticePeriod.Duration > 0)
	}
	return positive
}

// noticeRefused refuses notice settings that would change anything while the gate is off. A
// setting the object already had (stored while the gate was on) is kept on update: refusing it
// would block every other update, even the finalizer's removal on deletion.
func noticeRefused(path *field.Path, spec, old json.RawMessage) field.ErrorList {
	n, err := tsapi.ParseNoticeSettings(spec)
	if err != nil {
		return nil
	}
	var stored *tsapi.NoticeSettings
	if old != nil {
		if o, err := tsapi.ParseNoticeSettings(old); err == nil {
			stored = &o
		}
	}
	return n.InUse(path, features.NoticeGateOff, stored)
}

// noticeMark is the message of wl's True Condition: a notice, or what looks like one.
func noticeMark(wl *kueue.Workload) (string, bool) {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, Condition)
	if c == nil || c.Status != metav1.ConditionTrue {
		return "", false
	}
	return c.Message, true
}

// notice is the preemption notice in force on the candidate, if any.
var fact = policy.NewFact[annotations.Notice]()

// Of is the preemption notice in force on c, if any.
func Of(c *policy.Candidate) *annotations.Notice { return fact.Of(c) }

// readNotice reads the notice in force on wl; a record that is not one the manager gave is none.
func readNotice(c *policy.Candidate, wl *kueue.Workload, _ policy.Reading) {
	n, _ := Read(wl)
	fact.Set(c, n)
}

// Rule names the protection Option adds.
const Rule = "UnderNoticeForAnotherPreemptor"

// Option vetoes a candidate under notice for another preemptor: its room is promised.
func Option() policy.Option {
	return policy.WithProtections(policy.Rule{
		Name: Rule,
		When: func(in *policy.Input) bool { return ForOther(in.Candidate, in.Preemptor) },
		Why: func(in *policy.Input) string {
			n := fact.Of(in.Candidate)
			return fmt.Sprintf("under notice of preemption for %s until %s", n.PreemptorName(), n.Deadline.UTC().Format(time.RFC3339))
		},
	})
}

// ForOther reports whether c's room is promised to a preemptor other than p.
func ForOther(c *policy.Candidate, p *policy.Pending) bool {
	n := fact.Of(c)
	return n != nil && !c.Evicted && (p == nil || p.Obj == nil || n.PreemptorUID != p.Obj.UID)
}

// Outcome says how a notice ended; it is the reason of the PreemptionNotice condition once
// False and the outcome label of kueue_preemption_notices_total.
type Outcome string

const (
	// EvictedAtDeadline: the deadline came and the victim was evicted.
	EvictedAtDeadline Outcome = "EvictedAtDeadline"
	// EndedEarly: the victim said its checkpoint was done and was evicted then, or it
	// finished or was stopped by its owner first.
	EndedEarly Outcome = "EndedEarly"
	// Withdrawn: the preemptor no longer needed the room (deleted, finished, or admitted
	// without this eviction); the victim keeps running.
	Withdrawn Outcome = "Withdrawn"
)

// IsOutcome reports whether outcome is one of the NoticeOutcomes.
func IsOutcome(outcome string) bool {
	switch Outcome(outcome) {
	case EvictedAtDeadline, EndedEarly, Withdrawn:
		return true
	}
	return false
}

// The notice's per-ClusterQueue metrics, built by noticeMetrics.
var (
	noticeMetricsMu sync.Mutex
	// noticesEnded counts ended notices, by the victim's ClusterQueue, the preemption reason and
	// the outcome (Outcome).
	noticesEnded *prometheus.CounterVec
	// noticeToEviction is, per victim ClusterQueue, the time from a notice to the eviction that
	// ended it.
	noticeToEviction *prometheus.HistogramVec
)

// noticeMetrics builds the notice's metrics (Plugin.QueueMetrics); its gauge counts the notices in
// force, which the counter only sees once they end.
func noticeMetrics(labels func(names ...string) []string) ([]prometheus.Collector, *prometheus.GaugeVec) {
	ended := prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "kueue",
		Name:      "preemption_notices_total",
		Help: "Preemption notices ended, by the victim's ClusterQueue, preemption reason and outcome: EvictedAtDeadline, " +
			"EndedEarly (checkpoint done, or the workload stopped first), Withdrawn (the preemptor no longer needed the room).",
	}, labels("cluster_queue", "reason", "outcome", "replica_role"))
	toEviction := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "kueue",
		Name:      "preemption_notice_to_eviction_seconds",
		Help:      "Time from a preemption notice to the eviction that ended it, by the victim's ClusterQueue.",
		Buckets:   []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600},
	}, labels("cluster_queue", "replica_role"))
	inForce := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "kueue",
		Name:      "preemption_notices_in_force",
		Help:      "Workloads holding quota under a preemption notice now (not evicted yet), by ClusterQueue and preemption reason.",
	}, labels("cluster_queue", "reason", "replica_role"))
	noticeMetricsMu.Lock()
	defer noticeMetricsMu.Unlock()
	noticesEnded, noticeToEviction = ended, toEviction
	return []prometheus.Collector{ended, toEviction, inForce}, inForce
}

// ReportEnded counts one preemption notice on a workload of cq that ended with outcome; one
// ended by an eviction also observes how long after the notice the eviction came. custom are cq's
// custom label values. The reason and the notice's start come from the victim's annotations: an
// unknown reason counts as OtherLabel, and a start in the future as no time at all.
func ReportEnded(custom []string, cq kueue.ClusterQueueReference, reason, outcome, role string, evicted bool, after time.Duration) {
	noticeMetricsMu.Lock()
	ended, delay := noticesEnded, noticeToEviction
	noticeMetricsMu.Unlock()
	if ended == nil {
		// Not built by the manager's metrics yet (a process without them): built without
		// custom labels.
		noticeMetrics(func(names ...string) []string { return names })
		noticeMetricsMu.Lock()
		ended, delay = noticesEnded, noticeToEviction
		noticeMetricsMu.Unlock()
	}
	if !IsOutcome(outcome) {
		outcome = policy.OtherLabel
	}
	ended.WithLabelValues(append([]string{string(cq), policy.ReasonLabel(reason), outcome, role}, custom...)...).Inc()
	if evicted {
		delay.WithLabelValues(append([]string{string(cq), role}, custom...)...).Observe(max(after, 0).Seconds())
	}
}

// Due reports whether the notice on wl, given at the latest until n.Deadline, is over at now,
// and how: the deadline came, or the workload said its checkpoint is done.
func Due(n *annotations.Notice, wl *kueue.Workload, now time.Time) (bool, Outcome) {
	if annotations.CheckpointIsDone(wl.Annotations) {
		return true, EndedEarly
	}
	if !now.Before(n.Deadline) {
		return true, EvictedAtDeadline
	}
	return false, ""
}

// noticeChanges gives when a notice on c falls due: its deadline, for the preemptor waiting on it.
func noticeChanges(c *policy.Candidate, _ policy.WakeSettings, add func(policy.Change)) {
	if n := fact.Of(c); n != nil && !c.Evicted {
		add(policy.Change{At: n.Deadline})
	}
}

// Condition is the type of the Workload condition that shows a notice: True with the
// preemption reason while it runs, False with a Outcome once it has ended.
const Condition = "PreemptionNotice"

// FieldOwner is the server-side apply field manager that owns Condition.
const FieldOwner = "kueue-timeshare-notice"

// IsReason reports whether a preemption for reason can come with a notice; a notice naming
// any other reason was not given by the manager.
func IsReason(reason string) bool {
	return kindOf(reason) != noNotice
}

// The True Condition is the notice: the preemptor writes it in the victim's status, which
// tenants cannot write (Kueue's roles give them read access only), and every reader reads the
// notice from it. The annotations are a copy for people and for the victim's Pods, which the
// notice controller keeps equal to it. Its message is written for people and read back here, so
// both directions live side by side.
const noticeMessageFormat = "To be evicted at %s to make room for %s (uid %s) due to %s; " +
	"set the annotation " + annotations.CheckpointDone + "=true on its job or Workload once its work is saved to be evicted sooner"

var noticeMessage = regexp.MustCompile(`^To be evicted at (\S+) to make room for (?:workload (\S+)|` + annotations.OtherNamespaceWorkload + `) \(uid (\S+)\) due to (\S+); `)

// InForceMessage is the message of the True Condition that records notice n.
func InForceMessage(n *annotations.Notice) string {
	return fmt.Sprintf(noticeMessageFormat, n.Deadline.UTC().Format(time.RFC3339), n.PreemptorText(), n.PreemptorUID, n.Reason)
}

// ConditionOf is the True Condition that gives notice n, given at n.Start.
func ConditionOf(n *annotations.Notice, generation int64) metav1.Condition {
	return metav1.Condition{Type: Condition, Status: metav1.ConditionTrue, Reason: n.Reason, Message: InForceMessage(n),
		LastTransitionTime: metav1.NewTime(n.Start.UTC().Truncate(time.Second)), ObservedGeneration: generation}
}

// Read is the notice in force on wl, read from the manager's record (Record) in its
// status: nil when there is none, and an error naming the rule when the record cannot be a notice
// the manager gave (it cannot be read, its reason never gets a notice, or its deadline is beyond
// the longest notice a queue can set). The annotations are never read: a Workload's owner can
// write them.
func Read(wl *kueue.Workload) (*annotations.Notice, error) {
	c := apimeta.FindStatusCondition(wl.Status.Conditions, Condition)
	if c == nil || c.Status != metav1.ConditionTrue {
		return nil, nil
	}
	m := noticeMessage.FindStringSubmatch(c.Message)
	if m == nil || m[4] != c.Reason {
		return nil, fmt.Errorf("condition %s: the message does not give a notice", Condition)
	}
	deadline, err := time.Parse(time.RFC3339, m[1])
	if err != nil {
		return nil, fmt.Errorf("condition %s: the deadline: %w", Condition, err)
	}
	n := &annotations.Notice{Start: c.LastTransitionTime.Time.UTC(), Deadline: deadline, Reason: c.Reason, Preemptor: m[2], PreemptorUID: types.UID(m[3])}
	if !IsReason(n.Reason) {
		return nil, fmt.Errorf("condition %s: reason %q is not a preemption reason that gets a notice", Condition, n.Reason)
	}
	// A deadline is rounded up to the second when given.
	if longest := n.Start.Add(tsapi.MaximumNoticePeriod + time.Second); n.Deadline.After(longest) || !n.Deadline.After(n.Start) {
		return nil, fmt.Errorf("condition %s: the deadline is not within %s of the notice's start", Condition, tsapi.MaximumNoticePeriod)
	}
	return n, nil
}

// Copied reports whether wl's annotations are the copy of notice n (nil: no notice) that
// the notice controller keeps.
func Copied(wl *kueue.Workload, n *annotations.Notice) bool {
	if n == nil {
		_, notice := wl.Annotations[annotations.PreemptionNotice]
		_, deadline := wl.Annotations[annotations.PreemptionDeadline]
		return !notice && !deadline
	}
	for k, v := range n.Annotations() {
		if got, ok := wl.Annotations[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// EvictionOutcome is how a notice on wl ended when the preemptor evicted wl for it: early
// once the workload said its checkpoint was done, else at the deadline. The preemptor and the
// notice controller both record it, so that either may write the condition.
func EvictionOutcome(n *annotations.Notice, wl *kueue.Workload) (Outcome, string) {
	at := n.Deadline.UTC().Format(time.RFC3339)
	if annotations.CheckpointIsDone(wl.Annotations) {
		return EndedEarly, fmt.Sprintf("Evicted before its deadline %s: its checkpoint is done", at)
	}
	return EvictedAtDeadline, fmt.Sprintf("Evicted at its deadline %s", at)
}
