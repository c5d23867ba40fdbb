package reliability_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// fault is an error injected into one request of the scheduler's client.
type fault string

const (
	faultConflict    fault = "conflict (409)"
	faultInternal    fault = "internal error (500)"
	faultUnavailable fault = "unavailable (503)"
	faultTooMany     fault = "too many requests (429)"
	// faultTimeout: no answer, and the write did not happen.
	faultTimeout fault = "timeout before the write"
	// faultLostReply: the write happened, but the caller sees a timeout.
	faultLostReply fault = "timeout after the write"
)

var allFaults = []fault{faultConflict, faultInternal, faultUnavailable, faultTooMany, faultTimeout, faultLostReply}

// faults injects errors, at rate, into the Workload writes of the client it wraps. Reads go to
// the manager's informer cache and do not fail that way.
type faults struct {
	on   atomic.Bool
	rate float64
	mu   sync.Mutex
	rng  *rand.Rand
	// injected counts faults by the kind of request and the fault.
	injected map[string]int
}

func newFaults(rng *rand.Rand, rate float64) *faults {
	return &faults{rate: rate, rng: rng, injected: map[string]int{}}
}

// draw picks the fault for one request of kind, or "".
func (f *faults) draw(kind string) fault {
	if !f.on.Load() {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rng.Float64() >= f.rate {
		return ""
	}
	x := allFaults[f.rng.IntN(len(allFaults))]
	f.injected[kind+": "+string(x)]++
	return x
}

func (f *faults) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, v := range f.injected {
		if strings.HasPrefix(k, kind+": ") {
			n += v
		}
	}
	return n
}

// summary says how many faults hit each kind of request, and how many of each fault there were.
func (f *faults) summary() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	byKind, byFault := map[string]int{}, map[string]int{}
	total := 0
	for k, v := range f.injected {
		kind, x, _ := strings.Cut(k, ": ")
		byKind[kind] += v
		byFault[x] += v
		total += v
	}
	list := func(m map[string]int) string {
		var parts []string
		for k, v := range m {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
		sort.Strings(parts)
		return strings.Join(parts, ", ")
	}
	return fmt.Sprintf("%d faults: %s; %s", total, list(byKind), list(byFault))
}

// writeKind says what a Workload status write is: an eviction, a quota reservation, or a pending
// workload's condition.
func writeKind(obj client.Object) string {
	wl, ok := obj.(*kueue.Workload)
	switch {
	case !ok:
		return ""
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadEvicted):
		return "eviction"
	case apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved):
		return "admission"
	default:
		return "pending status"
	}
}

func (f *faults) err(x fault, obj client.Object) error {
	gr := kueue.SchemeGroupVersion.WithResource("workloads").GroupResource()
	switch x {
	case faultConflict:
		return apierrors.NewConflict(gr, obj.GetName(), errors.New("injected"))
	case faultInternal:
		return apierrors.NewInternalError(errors.New("injected"))
	case faultUnavailable:
		return apierrors.NewServiceUnavailable("injected")
	case faultTooMany:
		return apierrors.NewTooManyRequests("injected", 1)
	default:
		return apierrors.NewTimeoutError("injected", 1)
	}
}

// wrap is manager.Options.ClientWrapper: the scheduler's status writes and metadata patches of
// Workloads fail at the fault rate.
func (f *faults) wrap(c client.Client) client.Client {
	write := func(kind string, obj client.Object, do func() error) error {
		x := f.draw(kind)
		switch x {
		case "":
			return do()
		case faultLostReply:
			if err := do(); err != nil {
				return err
			}
		}
		return f.err(x, obj)
	}
	return interceptor.NewClient(noWatch{c}, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			do := func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) }
			if kind := writeKind(obj); kind != "" {
				return write(kind, obj, do)
			}
			return do()
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			do := func() error { return c.Patch(ctx, obj, patch, opts...) }
			if _, ok := obj.(*kueue.Workload); ok {
				return write("metadata", obj, do)
			}
			return do()
		},
	})
}

// noWatch lets a client.Client pass for the client.WithWatch the interceptor wraps; the
// scheduler never watches through its client.
type noWatch struct{ client.Client }

func (noWatch) Watch(context.Context, client.ObjectList, ...client.ListOption) (watch.Interface, error) {
	return nil, errors.New("watch is not supported by this client")
}

var _ = ginkgo.Describe("API faults injected into the scheduler's client", ginkgo.Ordered, func() {
	ctx := context.Background()

	ginkgo.It("retries or requeues every admission and eviction: none lost, none half written", func() {
		rng := rand.New(rand.NewPCG(seed, 3))
		jobs, rate := 40, 0.3
		if long {
			jobs = 200
		}
		f := newFaults(rand.New(rand.NewPCG(seed, 4)), rate)
		env, err := util.Start(util.Settings{Log: suiteLg, ClientWrapper: f.wrap})
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		ginkgo.DeferCleanup(func() { gomega.Expect(env.Stop()).To(gomega.Succeed()) })
		h := watchHistory(env.ControlPlane.Config)
		createBaseObjects(ctx, env.Client)
		ns := "faults"
		pol, queues := allPolicies(ctx, env.Client, ns)
		dumpOnFailure(env.Client, ns)

		f.on.Store(true)
		s := startStream(env.Client, ns, drawJobs(rng, jobs, queues))
		gomega.Eventually(s.done, 3*timeout).Should(gomega.BeClosed())
		ginkgo.By("running until faults have hit admissions and evictions")
		gomega.Eventually(func(g gomega.Gomega) {
			g.Expect(f.count("admission")).To(gomega.BeNumerically(">", 0))
			g.Expect(f.count("eviction")).To(gomega.BeNumerically(">", 0))
		}, 2*timeout, interval).Should(gomega.Succeed())
		s.stop()

		ginkgo.By("checking, with faults still on, that everything settles and nothing was half written")
		st := expectSettled(ctx, env.Client, ns, queues)
		gomega.Expect(h.violations(pol, nil)).To(gomega.BeEmpty())
		report("API faults: %d Jobs, %.0f%% of the scheduler's Workload writes failed: %s", jobs, rate*100, f.summary())
		report("API faults: %s", h.summary())
		report("API faults: settled with %d finished, %d admitted, %d pending (%d parked untried)", st.finished, st.admitted, st.pending, st.parked)

		ginkgo.By("draining with faults still on: every Job runs and finishes")
		drain(ctx, env.Client, ns)
		report("API faults: after draining, %s", f.summary())
	})
})
