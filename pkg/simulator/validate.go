package simulator

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsfeatures "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
)

// DefaultNamespace is where LocalQueues and workloads live unless the scenario says otherwise.
const DefaultNamespace = "default"

// DefaultStart is when simulations start unless simulation.start says otherwise.
var DefaultStart = time.Date(2026, time.January, 5, 9, 0, 0, 0, time.UTC)

// DefaultSchedulingInterval is simulation.schedulingInterval's default.
const DefaultSchedulingInterval = time.Second

// ourGates are the feature gates of the victim policy's features (each named after its gate), in
// their order of precedence: a scenario may set them.
func ourGates() []string {
	var out []string
	for _, f := range plugins.Precedence() {
		out = append(out, string(f))
	}
	return out
}

// WorkloadSpec is one workload of a scenario, with copies expanded and its queue resolved.
type WorkloadSpec struct {
	Name         string
	Namespace    string
	LocalQueue   string
	ClusterQueue string
	// Arrival is when it is submitted, from the start.
	Arrival time.Duration
	// Duration is the run time it needs to finish.
	Duration     time.Duration
	Checkpointed bool
	// CheckpointInterval is the run time between checkpoints, each taking CheckpointDuration; 0:
	// none (a job that is not Checkpointed then loses all its run time at each eviction).
	CheckpointInterval time.Duration
	CheckpointDuration time.Duration
	Pods               int32
	// Requests is what each pod asks for.
	Requests corev1.ResourceList
	// PriorityClass and PriorityKind name its class ("" for none); Priority is the class's value.
	PriorityClass string
	PriorityKind  kueue.PriorityClassKind
	Priority      int32
	Annotations   map[string]string
	// Snapshot is its state at the start, for a workload already in the cluster then.
	Snapshot *WorkloadSnapshot
	// DeactivateAfter, when set, is how long after each admission its owner deactivates it,
	// ReactivateAfter how long after that it is active again.
	DeactivateAfter, ReactivateAfter time.Duration
	// path is where it is declared, for messages.
	path string
}

// validate checks what decoding cannot: references between the objects, ranges, and the
// scenario's own fields.
func (p *parser) validate(s *Scenario) {
	p.s = s
	p.positive("simulation.until", s.Simulation.Until)
	if i := s.Simulation.SchedulingInterval; i != nil && i.Duration < time.Millisecond {
		p.errorf("simulation.schedulingInterval", "must be at least 1ms, not %s", i.Duration)
	}
	allowed := ScenarioGates()
	for _, name := range slices.Sorted(maps.Keys(s.FeatureGates)) {
		if !slices.Contains(allowed, name) {
			p.errorf(key("featureGates", name), "not a feature gate a scenario may set; use one of %s", strings.Join(allowed, ", "))
		}
	}
	for _, e := range tsconfig.Validate(s.timeshareConfig()) {
		// The configuration's paths start with "timeshare", as the scenario's do.
		p.errorf(e.Field, "%s", strings.TrimPrefix(e.ErrorBody(), "Invalid value: "))
	}
	if s.Timeshare.RuntimeClock == tsconfig.RuntimeClockPodsReady {
		p.errorf("timeshare.runtimeClock", "%s is not simulated (no Pod becomes ready); leave it out of a scenario", tsconfig.RuntimeClockPodsReady)
	}
	for i, st := range ptr.Deref(s.FairSharing, FairSharing{}).PreemptionStrategies {
		if !slices.Contains([]string{string(configapi.LessThanOrEqualToFinalShare), string(configapi.LessThanInitialShare)}, st) {
			p.errorf(index("fairSharing.preemptionStrategies", i), "%q is not supported; use one of %s, %s", st, configapi.LessThanOrEqualToFinalShare, configapi.LessThanInitialShare)
		}
	}
	p.references()
	if len(p.errs) == 0 {
		p.workloads()
	}
}

func (v *parser) positive(path string, d *Duration) {
	if d != nil && d.Duration <= 0 {
		v.errorf(path, "must be positive, not %s", d.Duration)
	}
}

func (v *parser) nonNegative(path string, d *Duration) {
	if d != nil && d.Duration < 0 {
		v.errorf(path, "must not be negative, not %s", d.Duration)
	}
}

// ScenarioGates are the feature gates a scenario may set: ours, and Kueue's whose default the
// manager changes.
func ScenarioGates() []string {
	return append(ourGates(), slices.Sorted(maps.Keys(tsfeatures.KueueDefaults))...)
}

// references checks what the API server does not: that every object a ClusterQueue, Cohort or
// LocalQueue names exists, that names are not declared twice, and that Cohorts form trees.
func (v *parser) references() {
	s := v.s
	if len(s.Flavors) == 0 {
		v.errorAt(0, "", "at least one ResourceFlavor is required")
	}
	if len(s.ClusterQueues) == 0 {
		v.errorAt(0, "", "at least one ClusterQueue is required")
	}
	seen := sets.New[string]()
	twice := func(kind, name, what string) {
		if seen.Has(what + name) {
			v.objectError(kind, name, "metadata.name", "%s %q is declared twice", what, name)
		}
		seen.Insert(what + name)
	}
	flavors := sets.New[string]()
	for _, f := range s.Flavors {
		twice("ResourceFlavor", f.Name, "ResourceFlavor")
		flavors.Insert(f.Name)
	}
	root := s.rootOf()
	for _, u := range append(slices.Clone(s.Cohorts), s.ClusterQueues...) {
		kind, name := u.GetKind(), u.GetName()
		twice(kind, name, kind)
		typed, _ := typedObject[queueSpec](u)
		for g, group := range typed.Spec.ResourceGroups {
			for i, f := range group.Flavors {
				if !flavors.Has(string(f.Name)) {
					v.objectError(kind, name, fmt.Sprintf("spec.resourceGroups[%d].flavors[%d].name", g, i), "ResourceFlavor %q is not declared", f.Name)
				}
			}
		}
		// A parent chain must end: Kueue leaves a cycle's queues unable to admit anything.
		if _, cycle := root(name); kind == "Cohort" && cycle {
			v.objectError(kind, name, "spec.parentName", "Cohort %q is its own ancestor (the parents form a cycle)", name)
		}
	}
	for _, lq := range s.LocalQueues {
		twice("LocalQueue", lq.Name, "LocalQueue "+lq.Namespace+"/")
		if s.clusterQueue(string(lq.Spec.ClusterQueue)) == nil {
			v.objectError("LocalQueue", lq.Name, "spec.clusterQueue", "ClusterQueue %q is not declared", lq.Spec.ClusterQueue)
		}
	}
	for _, pc := range s.WorkloadPriorityClasses {
		twice("WorkloadPriorityClass", pc.Name, "priority class")
	}
	for _, pc := range s.PriorityClasses {
		twice("PriorityClass", pc.Name, "priority class")
	}
}

// MaxWorkloads bounds the workloads of a scenario, copies included.
const MaxWorkloads = 100000

func (v *parser) workloads() {
	if len(v.s.Workloads) == 0 {
		v.errorf("workloads", "at least one workload is required")
	}
	total := 0
	for i, w := range v.s.Workloads {
		if total += max(w.Copies, 1); total > MaxWorkloads || total < 0 {
			v.errorf(fmt.Sprintf("workloads[%d].copies", i), "the scenario would have %d workloads; the simulator takes at most %d", total, MaxWorkloads)
			return
		}
	}
	for i, w := range v.s.Workloads {
		p := fmt.Sprintf("workloads[%d]", i)
		if problems := validation.IsDNS1123Subdomain(w.Name); len(problems) > 0 {
			v.errorf(child(p, "name"), "%q is not a valid name: %s", w.Name, strings.Join(problems, "; "))
		}
		if w.Arrival.Duration < 0 {
			v.errorf(child(p, "arrival"), "must not be negative, not %s", w.Arrival.Duration)
		}
		if _, set := v.lines[child(p, "duration")]; !set {
			v.errorf(child(p, "duration"), "required: the run time the workload needs to finish")
		} else if w.Duration.Duration <= 0 {
			v.errorf(child(p, "duration"), "must be positive, not %s", w.Duration.Duration)
		}
		if _, set := v.lines[child(p, "pods")]; set && w.Pods < 1 {
			v.errorf(child(p, "pods"), "must be at least 1, not %d", w.Pods)
		}
		if _, set := v.lines[child(p, "copies")]; set && w.Copies < 1 {
			v.errorf(child(p, "copies"), "must be at least 1, not %d", w.Copies)
		}
		v.nonNegative(child(p, "every"), w.Every)
		if w.Every != nil && w.Copies <= 1 {
			v.errorf(child(p, "every"), "only applies with copies greater than 1")
		}
		v.checkpoints(p, w)
		v.deactivation(p, w)
		v.workloadQueue(p, w)
		v.snapshot(p, w)
		if w.PriorityClass != "" {
			if _, _, ok := v.s.priorityClass(w.PriorityClass); !ok {
				v.errorf(child(p, "priorityClass"), "no WorkloadPriorityClass or PriorityClass %q", w.PriorityClass)
			}
		}
		if len(w.Resources) == 0 {
			v.errorf(child(p, "resources"), "required: what each pod asks for, like {cpu: 1}")
		}
		for _, r := range slices.Sorted(maps.Keys(w.Resources)) {
			if q := w.Resources[r]; q.Sign() <= 0 {
				v.errorf(key(child(p, "resources"), r), "must be positive")
			}
		}
		if er, ok := annotations.ParseExpectedRuntime(w.Annotations); ok && er.Problem != "" {
			name, _, _ := strings.Cut(strings.TrimPrefix(er.Problem, "annotation "), ":")
			v.errorf(key(child(p, "annotations"), name), "%s", er.Problem)
		}
		// A unit's state that its controller clears at an eviction is the manager's to write.
		for _, a := range cleared() {
			if _, ok := w.Annotations[a]; ok && slices.Contains(annotations.ManagerOwned(), a) {
				v.errorf(key(child(p, "annotations"), a), "written by the manager, not by a scenario")
			}
		}
	}
	if len(v.errs) > 0 {
		return
	}
	seen := map[string]string{}
	for _, w := range v.s.WorkloadSpecs() {
		k := w.Namespace + "/" + w.Name
		if first, dup := seen[k]; dup {
			v.errorf(child(w.path, "name"), "workload %s is declared twice (first at %s)", k, first)
			continue
		}
		seen[k] = w.path
		v.coveredResources(w)
		v.snapshotFlavors(w)
	}
}

func (v *parser) workloadQueue(p string, w Workload) {
	switch {
	case w.Queue != "" && w.ClusterQueue != "":
		v.errorf(child(p, "clusterQueue"), "set either queue (a LocalQueue) or clusterQueue, not both")
	case w.Queue == "" && w.ClusterQueue == "":
		v.errorf(child(p, "queue"), "required: a LocalQueue name (queue) or a ClusterQueue name (clusterQueue)")
	case w.ClusterQueue != "":
		if w.Namespace != "" {
			v.errorf(child(p, "namespace"), "only applies with queue; with clusterQueue the namespace is that of a LocalQueue of the ClusterQueue")
		}
		if v.s.clusterQueue(w.ClusterQueue) == nil {
			v.errorf(child(p, "clusterQueue"), "no ClusterQueue %q", w.ClusterQueue)
		}
	default:
		matches := v.s.localQueuesNamed(w.Queue, w.Namespace)
		switch {
		case len(matches) == 0 && w.Namespace != "":
			v.errorf(child(p, "queue"), "no LocalQueue %s/%s", w.Namespace, w.Queue)
		case len(matches) == 0:
			v.errorf(child(p, "queue"), "no LocalQueue %q", w.Queue)
		case len(matches) > 1:
			v.errorf(child(p, "namespace"), "LocalQueue %q exists in several namespaces; say which", w.Queue)
		}
	}
}

// coveredResources: a resource the ClusterQueue has no quota for makes the workload wait forever.
func (v *parser) coveredResources(w WorkloadSpec) {
	cq := v.s.clusterQueue(w.ClusterQueue)
	covered := sets.New[corev1.ResourceName]()
	for _, g := range cq.Spec.ResourceGroups {
		covered.Insert(g.CoveredResources...)
	}
	for _, r := range slices.Sorted(maps.Keys(w.Requests)) {
		if !covered.Has(r) {
			v.errorf(key(child(w.path, "resources"), string(r)), "ClusterQueue %s has no quota for %s, so the workload could never be admitted", cq.Name, r)
		}
	}
}

// WorkloadSpecs lists the scenario's workloads with copies expanded and queues resolved, in
// arrival order (declaration order among equal arrivals), leaving out those whose queue does not
// resolve.
func (s *Scenario) WorkloadSpecs() (out []WorkloadSpec) {
	for i, w := range s.Workloads {
		p := fmt.Sprintf("workloads[%d]", i)
		lq := s.localQueueFor(w.ClusterQueue)
		if w.ClusterQueue == "" || lq == nil {
			matches := s.localQueuesNamed(w.Queue, w.Namespace)
			if len(matches) != 1 {
				continue
			}
			lq = matches[0]
		}
		requests := corev1.ResourceList{}
		for r, q := range w.Resources {
			requests[corev1.ResourceName(r)] = q.Quantity
		}
		pods := cmp.Or(w.Pods, 1)
		copies := max(w.Copies, 1)
		for c := range copies {
			spec := WorkloadSpec{
				Name:               w.Name,
				Namespace:          lq.Namespace,
				LocalQueue:         lq.Name,
				ClusterQueue:       string(lq.Spec.ClusterQueue),
				Arrival:            w.Arrival.Duration,
				Duration:           w.Duration.Duration,
				Checkpointed:       w.Checkpointed,
				CheckpointInterval: ptr.Deref(w.CheckpointInterval, Duration{}).Duration,
				CheckpointDuration: ptr.Deref(w.CheckpointDuration, Duration{}).Duration,
				Pods:               pods,
				Requests:           requests,
				Annotations:        w.Annotations,
				Snapshot:           w.Snapshot,
				path:               p,
			}
			if d := w.Deactivate; d != nil {
				spec.DeactivateAfter, spec.ReactivateAfter = d.AfterAdmission.Duration, d.For.Duration
			}
			spec.Snapshot = s.resolvedSnapshot(spec)
			if copies > 1 {
				spec.Name = fmt.Sprintf("%s-%d", w.Name, c+1)
				if w.Every != nil {
					spec.Arrival += time.Duration(c) * w.Every.Duration
				}
			}
			if kind, value, found := s.priorityClass(w.PriorityClass); found {
				spec.PriorityClass, spec.PriorityKind, spec.Priority = w.PriorityClass, kind, value
			}
			out = append(out, spec)
		}
	}
	slices.SortStableFunc(out, func(a, b WorkloadSpec) int { return cmp.Compare(a.Arrival, b.Arrival) })
	return out
}

// deactivation checks deactivate: both times positive, so that the workload runs between two.
func (v *parser) deactivation(p string, w Workload) {
	if w.Deactivate == nil {
		return
	}
	v.positive(child(child(p, "deactivate"), "afterAdmission"), &w.Deactivate.AfterAdmission)
	v.positive(child(child(p, "deactivate"), "for"), &w.Deactivate.For)
}

// checkpoints checks checkpointInterval and checkpointDuration, which model how much work an
// eviction loses.
func (v *parser) checkpoints(p string, w Workload) {
	v.positive(child(p, "checkpointInterval"), w.CheckpointInterval)
	v.nonNegative(child(p, "checkpointDuration"), w.CheckpointDuration)
	if w.CheckpointInterval != nil && w.Checkpointed {
		v.errorf(child(p, "checkpointInterval"), "not with checkpointed: true, which keeps all progress at every eviction; use one or the other")
	}
	if w.CheckpointDuration != nil && w.CheckpointInterval == nil {
		v.errorf(child(p, "checkpointDuration"), "only applies with checkpointInterval")
	}
}
