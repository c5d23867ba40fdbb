package expectedruntime

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kueue-timeshare/kueue-timeshare/apis/annotations"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/minruntime"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
)

// DefaultCooldown is the cooldown a workload preempted for its expected runtime gets when it sets
// no requeue delay: given to the preemptor as a source, it turns expected-runtime requeue on.
type DefaultCooldown time.Duration

// Plugin is expected-runtime requeue's part in the preemptor: it counts the nominations of each
// search, and gives a victim of its expected runtime its cooldown.
type Plugin struct{}

// Feature is the plugin's gate.
func (Plugin) Feature() policy.Feature { return Feature }

// Metrics are the plugin's metrics, registered with the manager's (pkg/metrics reads them).
func (Plugin) Metrics() []prometheus.Collector {
	return []prometheus.Collector{nominations, nominationsSkipped}
}

// NotCarried is what a simulation from a snapshot does not carry of a workload's annotations (the
// kubectl plugin's what-if): the cooldown is the manager's own record (annotations.ManagerOwned),
// and the simulation writes its own.
func (Plugin) NotCarried(map[string]string) (string, []string) {
	return "", []string{annotations.RequeueNotBefore}
}

// Column is its column in the kubectl plugin's wide table of workloads holding quota.
func (Plugin) Column() *policy.Column {
	return &policy.Column{Header: "EXPECTED RUNTIME ENDS", Label: "expected-runtime", Cell: cell}
}

// Judged counts what a search made of a candidate that opted in: nominated, or skipped and why
// (a nominated candidate that min-runtime vetoed is a skip). Each is counted once per workload,
// admission and outcome, however many searches repeat it.
func (Plugin) Judged(h policy.Handle, c *policy.Candidate, d policy.Decision) {
	er := fact.Of(c)
	if er == nil {
		return
	}
	nominated, skip := Nominate(c, h.Now())
	if nominated && d.Rule == minruntime.Rule {
		skip = annotations.SkipMinRuntime
	}
	if !nominated && skip == "" {
		return
	}
	outcome := "nominated"
	if skip != "" {
		outcome = skip
		if logV := h.Log().V(4); logV.Enabled() {
			logV.Info("Expected-runtime nomination skipped", "candidate", klog.KObj(c.Info.Obj), "reason", skip, "problem", er.Problem)
		}
	}
	if h.First(string(c.Info.Obj.UID)+"/"+c.AdmittedAt.String()+"/"+outcome, time.Time{}) {
		countNomination(skip, h.Role())
	}
}

// AfterOwnEviction gives a workload preempted for its expected runtime its cooldown: its
// requeue-not-before annotation, from its requeue delay or else the DefaultCooldown.
func (Plugin) AfterOwnEviction(ctx context.Context, h policy.Handle, victim *kueue.Workload, reason string) {
	if reason != Reason {
		return
	}
	delay, _ := policy.SourceOf[DefaultCooldown](h.Sources())
	if s, ok := annotations.ParseExpectedRuntime(victim.Annotations); ok && s.Skip == "" && s.Delay > 0 {
		delay = DefaultCooldown(s.Delay)
	}
	notBefore := h.Now().Add(time.Duration(delay)).UTC().Format(time.RFC3339)
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, annotations.RequeueNotBefore, notBefore)
	obj := &kueue.Workload{}
	obj.Namespace, obj.Name = victim.Namespace, victim.Name
	if err := h.Client().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		h.Log().Error(err, "Could not write the expected-runtime cooldown", "workload", klog.KObj(victim))
		return
	}
	h.Log().V(3).Info("Expected-runtime cooldown written", "workload", klog.KObj(victim), "notBefore", notBefore)
}
