package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/grpclog"
	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/test/util"
)

// outage is the process of the control plane a round stops and starts again.
type outage string

const (
	outageAPIServer outage = "kube-apiserver"
	outageEtcd      outage = "etcd"
)

const (
	// workloadsPrefix is where kube-apiserver keeps Workloads in etcd (as JSON, like every
	// custom resource).
	workloadsPrefix = "/registry/kueue.x-k8s.io/workloads/"
	// preemptionBound is how soon after the server's return the preemption that waited through
	// the outage must go through.
	preemptionBound = 10 * time.Second
	// Client-go's reflectors: a watch that ended with 410 Gone (Expired), at verbosity 4, and the
	// start of every list and watch, at 3 (a relist after the first).
	msgWatchExpired = "Watch closed"
	msgListWatch    = "Listing and watching"
	msgLeaseLost    = "leader election lost"
)

// Outages of the control plane under a running manager: each round fills the cohort, leaves a
// preemption waiting for its victims' toleration to end, compacts etcd at its latest revision (the
// manager's watches then come back to a resource version that is gone: 410, relist), stops
// kube-apiserver for about ten seconds or etcd for a few, and starts it again where it was. The
// history is read from a watch on etcd, which sees every write across the outages.
var _ = ginkgo.Describe("kube-apiserver and etcd stopped and started again under the running manager", ginkgo.Ordered, func() {
	ctx := context.Background()
	// Leader election on, as the chart has it, with a renew deadline that outlasts an outage and
	// kube-apiserver's start on a loaded machine. With upstream's defaults (lease 15 s, renew
	// 10 s) a ten-second outage plus the start would exceed the renew deadline: the leader would
	// exit and a new process wait out the lease, as after the restart spec's kills.
	le := &controlplane.LeaderElection{Namespace: managerNamespace, LeaseDuration: 45 * time.Second, RenewDeadline: 40 * time.Second, RetryPeriod: 2 * time.Second}

	ginkgo.It("keeps every workload and protection, and puts a waiting preemption through within 10 s of each return", func() {
		rng := rand.New(rand.NewPCG(seed, 5))
		apiRestarts, etcdRestarts := 1, 1
		if long {
			apiRestarts, etcdRestarts = 10, 5
		}
		// Each etcd restart followed by a group of kube-apiserver's. The manager's reflectors back
		// off while kube-apiserver is down, and keep that backoff for two minutes (client-go): an
		// etcd restart first, on fresh reflectors, keeps the default form short.
		var outages []outage
		for g := range etcdRestarts {
			outages = append(outages, outageEtcd)
			n := apiRestarts / etcdRestarts
			if g < apiRestarts%etcdRestarts {
				n++
			}
			for range n {
				outages = append(outages, outageAPIServer)
			}
		}

		r := startRestartable()
		k := r.cluster
		// At 4 client-go logs each watch that ended with 410 Gone.
		k.verbosity = 4
		h := newHistory()
		r.feed = feedHistory(h, r.etcd)
		m, started := k.startReady("outages", le)
		var leader string
		gomega.Eventually(func(g gomega.Gomega) {
			leader = leaseHolder(g, ctx, k.client).holder
			g.Expect(leader).NotTo(gomega.BeEmpty())
		}, timeout, interval).Should(gomega.Succeed(), "the manager leads")

		createBaseObjects(ctx, k.client)
		ns := "outages"
		pol, queues := allPolicies(ctx, k.client, ns)
		dumpOnFailure(k.client, ns)

		took := map[outage][]time.Duration{}
		renewed := map[outage][]time.Duration{}
		downFor, startFor := map[outage][]time.Duration{}, map[outage][]time.Duration{}
		var admitted []time.Duration
		created := 0
		create := func(s jobSpec) *batchv1.Job {
			j := s.job(ns)
			gomega.Expect(k.client.Create(ctx, j)).To(gomega.Succeed())
			created++
			return j
		}
		for i, o := range outages {
			round := fmt.Sprintf("r%02d", i)
			ginkgo.By(fmt.Sprintf("outage %d/%d, %s: filling the cohort's 8 CPUs with Jobs tolerating preemption for %d s", i+1, len(outages), o, tolerationSeconds))
			var fillers []*batchv1.Job
			for _, q := range queues {
				for n := range q.cpu / 2 {
					fillers = append(fillers, create(jobSpec{name: fmt.Sprintf("%s-fill-%s-%d", round, q.name, n), queue: q.name, class: "tolerant", cpu: 2}))
				}
			}
			gomega.Eventually(func(g gomega.Gomega) {
				for _, j := range fillers {
					g.Expect(apimeta.IsStatusConditionTrue(util.WorkloadOf(g, ctx, k.client, j).Status.Conditions, kueue.WorkloadQuotaReserved)).To(gomega.BeTrue(), "%s holds quota", j.Name)
				}
			}, timeout, interval).Should(gomega.Succeed())
			for n := range 1 + rng.IntN(3) {
				create(jobSpec{name: fmt.Sprintf("%s-queued-%d", round, n), queue: queues[rng.IntN(len(queues))].name, class: "low", cpu: 1})
			}
			// A high-priority Job that needs a filler's quota: the scheduler tries it and leaves
			// it pending until the fillers' toleration ends, while the server is down.
			preemptor := create(jobSpec{name: round + "-preemptor", queue: "prio", class: "high", cpu: 2})
			gomega.Eventually(func(g gomega.Gomega) {
				qr := apimeta.FindStatusCondition(util.WorkloadOf(g, ctx, k.client, preemptor).Status.Conditions, kueue.WorkloadQuotaReserved)
				g.Expect(qr).NotTo(gomega.BeNil(), "the scheduler tried the preemptor")
				g.Expect(qr.Status).To(gomega.Equal(metav1.ConditionFalse))
			}, timeout, interval).Should(gomega.Succeed())

			before := h.preemptionCount()
			preempted := h.next(eventPreemption)
			var preemptedAt time.Time
			seen := make(chan struct{})
			go func() {
				<-preempted
				preemptedAt = time.Now()
				close(seen)
			}()
			// With the manager running: its watches come back after the outage to resource
			// versions etcd no longer has.
			rev := r.compact(ctx)
			ginkgo.By(fmt.Sprintf("compacted etcd at revision %d; stopping %s with the preemption waiting", rev, o))
			r.stop(o)
			downAt := time.Now()
			gomega.Expect(h.preemptionCount()).To(gomega.Equal(before), "the preemption still waited when %s went down", o)
			down := time.Duration(9500+rng.IntN(1000)) * time.Millisecond
			if o == outageEtcd {
				down = time.Duration(3000+rng.IntN(2000)) * time.Millisecond
			}
			// The outage itself: real time is what this spec injects.
			<-time.After(down)
			starting := time.Now()
			r.start(o, rev)
			// Back: envtest's Start returns once the server answers its health check.
			back := time.Now()
			downFor[o] = append(downFor[o], starting.Sub(downAt))
			startFor[o] = append(startFor[o], back.Sub(starting))

			ginkgo.By(fmt.Sprintf("%s back after %s: waiting for the preemption", o, back.Sub(downAt).Round(100*time.Millisecond)))
			select {
			case <-seen:
			case <-time.After(3 * timeout):
				ginkgo.Fail(fmt.Sprintf("no preemption within %s of %s's return", 3*timeout, o))
			}
			// Before the return (0): the eviction that waited in kube-apiserver for etcd went
			// through as soon as etcd answered, before its health check did.
			d := max(0, preemptedAt.Sub(back))
			took[o] = append(took[o], d)
			gomega.Expect(d).To(gomega.BeNumerically("<=", preemptionBound), "the waiting preemption went through %s after %s's return", d, o)

			// The same process, ready, still leading: its lease renewed since the outage began,
			// before the lease could expire.
			gomega.Eventually(func(g gomega.Gomega) {
				m.expectReady(g)
				l := leaseHolder(g, ctx, k.client)
				g.Expect(l.holder).To(gomega.Equal(leader), "the lease stays with the manager")
				g.Expect(l.renewed).To(gomega.BeTemporally(">", downAt), "the lease renewed after the return")
			}, le.LeaseDuration, 100*time.Millisecond).Should(gomega.Succeed(), "ready and holding the lease within its duration (%s) of the return", le.LeaseDuration)
			renewed[o] = append(renewed[o], time.Since(back))

			// The manager sees the victim's release once its Workload watch is back: after
			// client-go's reflector backoff (up to 30 s, doubled by jitter, kept for two minutes)
			// to reconnect, then again to relist after 410 Gone.
			gomega.Eventually(func(g gomega.Gomega) {
				g.Expect(apimeta.IsStatusConditionTrue(util.WorkloadOf(g, ctx, k.client, preemptor).Status.Conditions, kueue.WorkloadQuotaReserved)).To(gomega.BeTrue())
				g.Expect(util.Unsuspended(g, ctx, k.client, preemptor)).To(gomega.BeTrue())
			}, 3*timeout, 100*time.Millisecond).Should(gomega.Succeed(), "the preemptor gets the victim's quota and runs")
			admitted = append(admitted, time.Since(back))

			ginkgo.By("draining the round: every Job runs and finishes")
			drain(ctx, k.client, ns)
		}

		ginkgo.By("checking that nothing was lost: every Job created is there, with one finished Workload")
		var jobs batchv1.JobList
		gomega.Expect(k.client.List(ctx, &jobs, client.InNamespace(ns))).To(gomega.Succeed())
		gomega.Expect(jobs.Items).To(gomega.HaveLen(created))
		st := expectSettled(ctx, k.client, ns, queues)
		gomega.Expect(st.finished).To(gomega.Equal(created))

		ginkgo.By("checking the history from etcd's own watch: every write in order, none missed")
		gomega.Expect(r.feed.failures()).To(gomega.BeEmpty())
		logged := preemptionsLogged(started)
		gomega.Expect(h.violations(pol, logged)).To(gomega.BeEmpty())

		ginkgo.By("checking that the manager lived through every outage, leading, and relisted after 410 Gone")
		entries := m.entries()
		gomega.Expect(m.alive()).To(gomega.BeTrue())
		gomega.Expect(count(entries, msgAcquiredLease)).To(gomega.Equal(1), "acquired the lease once and kept it")
		gomega.Expect(count(entries, msgLeaseLost)).To(gomega.BeZero())
		expired, relists, reflectors := watchRestarts(entries)
		gomega.Expect(expired).To(gomega.BeNumerically(">", 0), "a watch of the manager ended with 410 Gone")
		gomega.Expect(relists).To(gomega.BeNumerically(">", 0), "the manager relisted")

		report("outages: seed %d; %d kube-apiserver restarts (stopped %s, then healthy %s after its start), %d etcd restarts (stopped %s, healthy %s after its start); %d compactions at etcd's latest revision, each just before a stop",
			seed, apiRestarts, spread(downFor[outageAPIServer]), spread(startFor[outageAPIServer]),
			etcdRestarts, spread(downFor[outageEtcd]), spread(startFor[outageEtcd]), len(outages))
		report("outages: from the return to the waiting preemption: kube-apiserver %s, etcd %s (bound %s); to the preemptor's admission: %s; lease renewed by the same leader %s after the return (lease %s, renew deadline %s)",
			spread(took[outageAPIServer]), spread(took[outageEtcd]), preemptionBound, spread(admitted), spread(append(renewed[outageAPIServer], renewed[outageEtcd]...)), le.LeaseDuration, le.RenewDeadline)
		report("outages: the manager saw %d watches end with 410 Gone and relisted %d times (%d reflectors)", expired, relists, reflectors)
		report("outages: %d Jobs; %s; %d evictions logged; peak %dm of %dm CPU reserved at any write", created, h.summary(), total(logged), h.peakCommitted(), pol.capacity)

		ginkgo.By("checking that the manager logged no token, password or key")
		k.expectNoSecrets(started)
	})
})

// restartable is a control plane whose kube-apiserver and etcd can be stopped and started again
// on their addresses: etcd keeps its data, and kube-apiserver its certificates, in directories
// of the spec's (envtest removes temporary ones on Stop, and would make new certificates).
type restartable struct {
	*cluster
	env  *envtest.Environment
	etcd *clientv3.Client
	feed *etcdFeed
	// certs is kube-apiserver's serving certificate, to check that a restart keeps it.
	certs []byte
}

// startRestartable starts the control plane controlplane.Start starts, with explicit directories
// and Jobs' watch cache off (their watches are served by etcd, which a compaction affects).
func startRestartable() *restartable {
	ginkgo.GinkgoHelper()
	dir := clusterDir()
	convertible, err := controlplane.ConvertibleScheme()
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	env := &envtest.Environment{
		BinaryAssetsDirectory:    filepath.Join(root, controlplane.BinDir),
		CRDDirectoryPaths:        []string{filepath.Join(root, controlplane.CRDDir)},
		ErrorIfCRDPathMissing:    true,
		CRDInstallOptions:        envtest.CRDInstallOptions{Scheme: convertible, MaxTime: controlplane.StartTimeout},
		ControlPlaneStartTimeout: controlplane.StartTimeout,
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths:            []string{filepath.Join(root, controlplane.WebhookDir)},
			LocalServingHost: "127.0.0.1",
		},
	}
	for _, d := range []string{"etcd-data", "apiserver", "front-proxy"} {
		gomega.Expect(os.MkdirAll(filepath.Join(dir, d), 0o700)).To(gomega.Succeed())
	}
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(dir, "etcd-data")}
	api := env.ControlPlane.GetAPIServer()
	api.CertDir = filepath.Join(dir, "apiserver")
	// As controlplane.StartWith without Pods.
	api.Configure().Append("feature-gates", "MutableSchedulingDirectivesForSuspendedJobs=false")
	api.Configure().Set("watch-cache-sizes", "jobs.batch#0")
	// Without it the manager's open watches kept kube-apiserver from exiting within envtest's
	// stop timeout (20 s).
	api.Configure().Set("shutdown-watch-termination-grace-period", "2s")
	gomega.Expect(controlplane.ConfigureFrontProxy(env, filepath.Join(dir, "front-proxy"))).To(gomega.Succeed())
	// Their logs go beside the managers', for a failure to be understood.
	logTo := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		ginkgo.DeferCleanup(f.Close)
		return f
	}
	env.ControlPlane.Etcd.Out = logTo("etcd.log")
	env.ControlPlane.Etcd.Err = env.ControlPlane.Etcd.Out
	api.Out = logTo("kube-apiserver.log")
	api.Err = api.Out

	cfg, err := controlplane.StartEnv(env)
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(func() {
		gomega.Expect(env.Stop()).To(gomega.Succeed())
		// Only the logs are worth keeping under RELIABILITY_LOG_DIR.
		gomega.Expect(os.RemoveAll(filepath.Join(dir, "etcd-data"))).To(gomega.Succeed())
	})
	r := &restartable{env: env}
	r.certs, err = os.ReadFile(filepath.Join(api.CertDir, "apiserver.crt"))
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	r.cluster = startClusterOn(&controlplane.ControlPlane{Env: env, Config: cfg, Root: root}, dir)
	// gRPC would log every failed dial while etcd is down to the test's output.
	quietGRPC.Do(func() { grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, io.Discard, io.Discard)) })
	r.etcd, err = clientv3.New(clientv3.Config{Endpoints: []string{env.ControlPlane.Etcd.URL.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(r.etcd.Close)
	return r
}

var quietGRPC sync.Once

// stop stops the process of o gracefully, as envtest does (SIGTERM).
func (r *restartable) stop(o outage) {
	ginkgo.GinkgoHelper()
	if o == outageAPIServer {
		gomega.Expect(r.env.ControlPlane.APIServer.Stop()).To(gomega.Succeed())
		return
	}
	gomega.Expect(r.env.ControlPlane.Etcd.Stop()).To(gomega.Succeed())
}

// start starts the process of o again and checks that it came back as it was: kube-apiserver on
// its port with its certificate (the manager's kubeconfig still works), etcd on its address with
// its data (at least the revision compacted before the stop).
func (r *restartable) start(o outage, rev int64) {
	ginkgo.GinkgoHelper()
	ctx := context.Background()
	if o == outageAPIServer {
		api := r.env.ControlPlane.APIServer
		port := api.SecureServing.Port
		gomega.Expect(api.Start()).To(gomega.Succeed())
		gomega.Expect(api.SecureServing.Port).To(gomega.Equal(port))
		certs, err := os.ReadFile(filepath.Join(api.CertDir, "apiserver.crt"))
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
		gomega.Expect(bytes.Equal(certs, r.certs)).To(gomega.BeTrue(), "kube-apiserver serves the certificate it had")
		return
	}
	e := r.env.ControlPlane.Etcd
	url := e.URL.String()
	gomega.Expect(e.Start()).To(gomega.Succeed())
	gomega.Expect(e.URL.String()).To(gomega.Equal(url))
	gomega.Eventually(func(g gomega.Gomega) {
		resp, err := r.etcd.Get(ctx, workloadsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		g.Expect(err).NotTo(gomega.HaveOccurred())
		g.Expect(resp.Header.Revision).To(gomega.BeNumerically(">=", rev), "etcd keeps its data")
	}, timeout, 50*time.Millisecond).Should(gomega.Succeed())
}

// compact compacts etcd at its latest revision, once the history's own watch has reached it (a
// watch behind a compacted revision is cancelled), and returns that revision.
func (r *restartable) compact(ctx context.Context) int64 {
	ginkgo.GinkgoHelper()
	resp, err := r.etcd.Get(ctx, workloadsPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	rev := resp.Header.Revision
	gomega.Eventually(func(g gomega.Gomega) {
		g.Expect(r.etcd.RequestProgress(ctx)).To(gomega.Succeed())
		g.Expect(r.feed.reached.Load()).To(gomega.BeNumerically(">=", rev))
	}, timeout, 50*time.Millisecond).Should(gomega.Succeed(), "the history's watch reaches revision %d", rev)
	_, err = r.etcd.Compact(ctx, rev, clientv3.WithCompactPhysical())
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	return rev
}

// etcdFeed feeds a history from a watch on etcd itself, under kube-apiserver: it sees every
// write of a Workload in order, also across kube-apiserver's restarts, where an informer would
// relist and could miss a state.
type etcdFeed struct {
	// reached is the revision up to which the watch has delivered every write.
	reached atomic.Int64
	mu      sync.Mutex
	errs    []string
}

func feedHistory(h *history, cli *clientv3.Client) *etcdFeed {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	ginkgo.DeferCleanup(cancel)
	f := &etcdFeed{}
	resp, err := cli.Get(ctx, workloadsPrefix, clientv3.WithPrefix())
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	for _, kv := range resp.Kvs {
		f.put(h, kv.Value, kv.ModRevision)
	}
	f.reached.Store(resp.Header.Revision)
	// The client resumes the watch from its last revision when etcd comes back.
	wch := cli.Watch(ctx, workloadsPrefix, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	go func() {
		for wr := range wch {
			if err := wr.Err(); err != nil {
				f.fail(err.Error())
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					f.put(h, ev.Kv.Value, ev.Kv.ModRevision)
				}
				f.reached.Store(max(f.reached.Load(), ev.Kv.ModRevision))
			}
			if wr.IsProgressNotify() {
				f.reached.Store(max(f.reached.Load(), wr.Header.Revision))
			}
		}
		if ctx.Err() == nil {
			f.fail("the watch on etcd ended")
		}
	}()
	return f
}

func (f *etcdFeed) put(h *history, value []byte, rev int64) {
	wl := &kueue.Workload{}
	if err := json.Unmarshal(value, wl); err != nil {
		f.fail(fmt.Sprintf("decoding a Workload at revision %d: %v", rev, err))
		return
	}
	wl.ResourceVersion = strconv.FormatInt(rev, 10)
	h.observe(wl)
}

func (f *etcdFeed) fail(msg string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs = append(f.errs, msg)
}

func (f *etcdFeed) failures() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.errs)
}

type lease struct {
	holder  string
	renewed time.Time
}

// leaseHolder reads the managers' Lease.
func leaseHolder(g gomega.Gomega, ctx context.Context, c client.Client) lease {
	var l coordinationv1.Lease
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: configapi.DefaultLeaderElectionID}, &l)).To(gomega.Succeed())
	out := lease{}
	if l.Spec.HolderIdentity != nil {
		out.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		out.renewed = l.Spec.RenewTime.Time
	}
	return out
}

// watchRestarts counts, in a manager's log, the watches that ended with 410 Gone, the relists
// (every list and watch of a reflector after its first) and the reflectors.
func watchRestarts(entries []logEntry) (expired, relists, reflectors int) {
	seen := map[string]bool{}
	for _, e := range entries {
		switch e.Msg {
		case msgWatchExpired:
			expired++
		case msgListWatch:
			key := string(e.Reflector + " " + e.Type)
			if seen[key] {
				relists++
			}
			seen[key] = true
		}
	}
	return expired, relists, len(seen)
}

// spread says "max X, median Y" of ds, rounded, or "none".
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	median := (s[(len(s)-1)/2] + s[len(s)/2]) / 2
	return fmt.Sprintf("max %s, median %s", s[len(s)-1].Round(100*time.Millisecond), median.Round(100*time.Millisecond))
}
