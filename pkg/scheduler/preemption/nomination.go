package preemption

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// DefaultCooldown is the cooldown a workload preempted for its expected runtime gets when it
// sets no requeue delay: given to WithSources, it turns on expected-runtime requeue.
type DefaultCooldown time.Duration

// expectedRuntimePlugin is expected-runtime requeue's part in the preemptor: a victim of its
// expected runtime gets a cooldown.
type expectedRuntimePlugin struct{}

func (expectedRuntimePlugin) Feature() policy.Feature { return policy.FeatureExpectedRuntime }

func (expectedRuntimePlugin) optionFor(src any) (Option, bool) {
	return sourceOption(src, func(d DefaultCooldown) Option { return WithExpectedRuntimeRequeue(time.Duration(d)) })
}

func (expectedRuntimePlugin) afterOwnEviction(p *Preemptor, ctx context.Context, victim *kueue.Workload, reason string) {
	if reason == policy.ExpectedRuntimeReason {
		p.writeCooldown(ctx, victim)
	}
}

// WithExpectedRuntimeRequeue lets workloads that ran past their expected runtime be preempted by
// workloads of equal or higher priority of their ClusterQueue (see policy.WithExpectedRuntimeRequeue),
// while the ExpectedRuntimeRequeue gate is on. After such a preemption the victim gets a cooldown
// (its requeue-delay annotation, else defaultDelay), written with the preemptor's client.
func WithExpectedRuntimeRequeue(defaultDelay time.Duration) Option {
	return func(c *config) {
		c.defaultRequeueDelay = defaultDelay
		c.features = append(c.features, policy.FeatureExpectedRuntime)
	}
}

// nominationTally counts nominations and skips of one search.
type nominationTally struct {
	nominated int
	skipped   map[string]int
	// keys name each nomination or skip by workload, admission and outcome, for the metrics.
	keys []nominationKey
}

type nominationKey struct {
	key, skip string
}

// add records what the search made of a candidate, if it opted in.
func (t *nominationTally) add(s *search, c *policy.Candidate, d policy.Decision) {
	if policy.ExpectedRuntimeOf(c) == nil {
		return
	}
	nominated, skip := policy.Nominate(c, s.now)
	switch {
	case nominated && d.Rule == policy.RuleMinRuntime:
		skip = annotations.SkipMinRuntime
	case nominated:
		t.nominated++
		t.keys = append(t.keys, nominationKey{key: string(c.Info.Obj.UID) + "/" + c.AdmittedAt.String() + "/nominated"})
	}
	if skip == "" {
		return
	}
	t.keys = append(t.keys, nominationKey{key: string(c.Info.Obj.UID) + "/" + c.AdmittedAt.String() + "/" + skip, skip: skip})
	if t.skipped == nil {
		t.skipped = map[string]int{}
	}
	t.skipped[skip]++
	if logV := s.log.V(4); logV.Enabled() {
		logV.Info("Expected-runtime nomination skipped", "candidate", klog.KObj(c.Info.Obj), "reason", skip, "problem", policy.ExpectedRuntimeOf(c).Problem)
	}
}

func (t *nominationTally) report(log *metrics.Decisions, role string, now time.Time) {
	for _, k := range t.keys {
		if !log.First(k.key, now, time.Time{}) {
			continue
		}
		policy.CountNomination(k.skip, role)
	}
}

// writeCooldown sets requeue-not-before on a workload preempted for its expected runtime.
func (p *Preemptor) writeCooldown(ctx context.Context, wl *kueue.Workload) {
	log := ctrllog.FromContext(ctx)
	delay := p.defaultRequeueDelay
	if s, ok := annotations.ParseExpectedRuntime(wl.Annotations); ok && s.Skip == "" && s.Delay > 0 {
		delay = s.Delay
	}
	notBefore := p.clock.Now().Add(delay).UTC().Format(time.RFC3339)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annotations.RequeueNotBefore, notBefore)
	obj := &kueue.Workload{}
	obj.Namespace, obj.Name = wl.Namespace, wl.Name
	if err := p.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		log.Error(err, "Could not write the expected-runtime cooldown", "workload", klog.KObj(wl))
		return
	}
	log.V(3).Info("Expected-runtime cooldown written", "workload", klog.KObj(wl), "notBefore", notBefore)
}
