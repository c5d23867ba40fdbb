// Package manager assembles the kueue-timeshare controller manager: upstream Kueue's controllers,
// job integrations, webhooks, caches, visibility server and metrics, wired through their exported
// setup functions, plus the parts this project owns.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	configapi "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	qcache "sigs.k8s.io/kueue/pkg/cache/queue"
	schdcache "sigs.k8s.io/kueue/pkg/cache/scheduler"
	"sigs.k8s.io/kueue/pkg/cache/scheduler/was"
	"sigs.k8s.io/kueue/pkg/config"
	"sigs.k8s.io/kueue/pkg/constants"
	"sigs.k8s.io/kueue/pkg/controller/admissionchecks/multikueue"
	"sigs.k8s.io/kueue/pkg/controller/admissionchecks/multikueue/externalframeworks"
	"sigs.k8s.io/kueue/pkg/controller/admissionchecks/provisioning"
	"sigs.k8s.io/kueue/pkg/controller/concurrentadmission"
	"sigs.k8s.io/kueue/pkg/controller/core"
	"sigs.k8s.io/kueue/pkg/controller/core/indexer"
	"sigs.k8s.io/kueue/pkg/controller/elasticjobs"
	"sigs.k8s.io/kueue/pkg/controller/failurerecovery"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
	"sigs.k8s.io/kueue/pkg/controller/tas"
	tasindexer "sigs.k8s.io/kueue/pkg/controller/tas/indexer"
	"sigs.k8s.io/kueue/pkg/controller/workloaddispatcher"
	"sigs.k8s.io/kueue/pkg/debugger"
	"sigs.k8s.io/kueue/pkg/dra"
	"sigs.k8s.io/kueue/pkg/features"
	"sigs.k8s.io/kueue/pkg/metrics"
	"sigs.k8s.io/kueue/pkg/resources"
	upstreamscheduler "sigs.k8s.io/kueue/pkg/scheduler"
	preemptexpectations "sigs.k8s.io/kueue/pkg/scheduler/preemption/expectations"
	"sigs.k8s.io/kueue/pkg/scheduler/preemption/fairsharing"
	"sigs.k8s.io/kueue/pkg/util/cert"
	utildra "sigs.k8s.io/kueue/pkg/util/dra"
	"sigs.k8s.io/kueue/pkg/util/expectations"
	"sigs.k8s.io/kueue/pkg/util/kubeversion"
	"sigs.k8s.io/kueue/pkg/util/roletracker"
	"sigs.k8s.io/kueue/pkg/util/tlsconfig"
	"sigs.k8s.io/kueue/pkg/util/useragent"
	"sigs.k8s.io/kueue/pkg/webhooks"
	"sigs.k8s.io/kueue/pkg/workload"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	tsconversion "github.com/kueue-timeshare/kueue-timeshare/pkg/conversion"
	tsfeatures "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
	tsmetrics "github.com/kueue-timeshare/kueue-timeshare/pkg/metrics"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/plugins/budget"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/policy"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/scheduler/preemption"

	// Stamps upstream's version variables, read by kueue_build_info, with this build's.
	_ "github.com/kueue-timeshare/kueue-timeshare/pkg/version"
	tsvisibility "github.com/kueue-timeshare/kueue-timeshare/pkg/visibility"
	tswebhooks "github.com/kueue-timeshare/kueue-timeshare/pkg/webhooks"
)

// DefaultMetricsCertDir is where upstream's deployment mounts the metrics serving certificate
// when internal certificate management is off.
const DefaultMetricsCertDir = "/etc/kueue/metrics/certs"

// Options are the settings of this binary that upstream's Configuration does not carry.
type Options struct {
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint when internal
	// certificate management is disabled.
	MetricsCertDir string
	// InsecureMetrics serves /metrics over plain HTTP without authentication. Meant for a
	// local control plane only; a cluster deployment keeps the secure default.
	InsecureMetrics bool
	// Log is the logger for set-up messages.
	Log logr.Logger
	// UpstreamScheduler runs upstream's admission loop instead of ours, to compare the two.
	UpstreamScheduler bool
	// Clock replaces the scheduler's and preemptor's clock, for tests of time windows.
	Clock clock.Clock
	// VisibilityCertDir holds the visibility server's certificate (tls.crt, tls.key), or receives a
	// self-signed one when internal certificate management is on.
	VisibilityCertDir string
	// Kubeconfig is the file the visibility server delegates authentication and authorization
	// with; empty means the in-cluster configuration.
	Kubeconfig string
	// ClientWrapper, when set, wraps the client the scheduler and its preemptor read and write
	// through (quota reservations, pending messages, evictions, expected-runtime cooldowns), and
	// nothing else's. For tests that inject API faults into admission and eviction.
	ClientWrapper func(client.Client) client.Client
}

// Manager is a controller-runtime manager with the Kueue components it runs.
type Manager struct {
	ctrl.Manager

	Cache  *schdcache.Cache
	Queues *qcache.Manager

	cfg          configapi.Configuration
	timeshareCfg tsconfig.Configuration
	opts         Options
	log          logr.Logger

	roleTracker            *roletracker.RoleTracker
	preemptionExpectations *expectations.Store
	customLabels           *metrics.CustomLabels
	lqMetrics              *metrics.LocalQueueMetricsConfig
	resourceFormatter      *resources.ResourceFormatter
	tlsOpts                *tlsconfig.TLS
	kubeConfig             *rest.Config
	draMapper              *dra.ResourceMapper
	draResources           *dra.ExtendedResourceCache
	// settings are the kueue-timeshare fields of each ClusterQueue and Cohort, for our preemptor.
	settings *queuesettings.Store
	// sources are the units' sources of facts that read the cluster (policy.ClusterSource).
	sources policy.Sources
	// workloadIndex lists the workloads a policy unit may have marked, for our preemptor.
	workloadIndex *preemption.WorkloadIndex
	// preemptor is the scheduler's, once built, for the admission estimate.
	preemptor atomic.Pointer[preemption.Preemptor]
	// scheduler is the loop, once built; the estimates read its ClusterQueues' active preemptors.
	scheduler atomic.Pointer[scheduler.Scheduler]
	// estimateCache is the admission estimates, nil under upstream's scheduler.
	estimateCache *cachedEstimates
}

// New builds the manager and every component it runs; nothing starts until Start.
// cfg must come from LoadConfig, which also applies the feature gates.
func New(ctx context.Context, kubeConfig *rest.Config, ctrlOpts ctrl.Options, all Config, o Options) (*Manager, error) {
	if o.MetricsCertDir == "" {
		o.MetricsCertDir = DefaultMetricsCertDir
	}
	if o.VisibilityCertDir == "" {
		o.VisibilityCertDir = tsvisibility.DefaultCertDir
	}
	cfg := all.Kueue
	tsconfig.SetDefaults(&all.Timeshare)
	m := &Manager{cfg: cfg, timeshareCfg: all.Timeshare, opts: o, log: o.Log, kubeConfig: rest.CopyConfig(kubeConfig)}
	if m.kubeConfig.UserAgent == "" {
		m.kubeConfig.UserAgent = useragent.Default()
	}
	// One token bucket for every typed client; a negative QPS turns client-side throttling off.
	if qps := ptr.Deref(cfg.ClientConnection.QPS, -1); qps >= 0 {
		m.kubeConfig.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, int(ptr.Deref(cfg.ClientConnection.Burst, 0)))
	}

	m.tlsOpts = &tlsconfig.TLS{}
	if features.Enabled(features.TLSOptions) {
		parsed, err := tlsconfig.ParseTLSOptions(cfg.TLS)
		if err != nil {
			return nil, fmt.Errorf("tls: %w", err)
		}
		m.tlsOpts = parsed
	}
	metricsOpts, certWatcher, err := m.metricsServerOptions()
	if err != nil {
		return nil, err
	}
	ctrlOpts.Metrics = metricsOpts

	if internalCertsEnabled(&m.cfg) {
		// Certificates must exist before the manager starts: conversion webhooks and the CA
		// bundles in CRDs depend on them.
		if err := cert.BootstrapCerts(ctx, m.kubeConfig, m.cfg); err != nil {
			return nil, fmt.Errorf("bootstrapping certificates: %w", err)
		}
	}
	if features.Enabled(features.MultiKueueClusterProfile) {
		if err := config.ConfigureClusterProfileCache(ctx, m.log, &ctrlOpts, m.kubeConfig, m.cfg); err != nil {
			return nil, fmt.Errorf("configuring the cluster profile cache: %w", err)
		}
	}

	mgr, err := ctrl.NewManager(m.kubeConfig, ctrlOpts)
	if err != nil {
		return nil, fmt.Errorf("creating controller manager: %w", err)
	}
	m.Manager = mgr

	if leaderElectionEnabled(&m.cfg) {
		m.roleTracker = roletracker.NewRoleTracker(mgr.Elected())
		go m.roleTracker.Start(ctx, m.log)
	}

	certsReady := make(chan struct{})
	if internalCertsEnabled(&m.cfg) {
		if err := cert.ManageCerts(mgr, m.cfg, certsReady); err != nil {
			return nil, fmt.Errorf("setting up certificate rotation: %w", err)
		}
	} else {
		close(certsReady)
	}
	if certWatcher != nil {
		if err := mgr.Add(certWatcher); err != nil {
			return nil, fmt.Errorf("adding metrics certificate watcher: %w", err)
		}
	}

	if err := m.buildCaches(ctx); err != nil {
		return nil, err
	}
	resourceSliceAPI := utildra.CheckResourceSliceAPIAvailable(mgr)
	if err := m.setupIndexes(ctx, resourceSliceAPI); err != nil {
		return nil, fmt.Errorf("setting up field indexes: %w", err)
	}
	debugger.NewDumper(m.Cache, m.Queues).ListenForSignal(ctx)

	versions, err := m.serverVersionFetcher()
	if err != nil {
		return nil, err
	}
	if err := m.setupProbes(certsReady); err != nil {
		return nil, err
	}
	if m.roleTracker != nil {
		m.roleTracker.OnElected(func() {
			metrics.ClearGaugeMetricsForRole(roletracker.RoleFollower)
			m.Cache.ResyncGaugeMetrics(m.log)
			m.Queues.ResyncGaugeMetrics()
		})
	}
	if err := m.setupControllers(ctx, versions, resourceSliceAPI); err != nil {
		return nil, err
	}
	// Ours first: controller-runtime's webhook builder, which upstream's set-up calls, registers
	// its own /convert (which drops our fields) only while nothing serves that path.
	mgr.GetWebhookServer().Register(tsconversion.Path, tsconversion.NewHandler(mgr.GetScheme(), m.log.WithName("conversion-webhook")))
	if name, err := webhooks.Setup(mgr, m.roleTracker); err != nil {
		return nil, fmt.Errorf("setting up webhook %s: %w", name, err)
	}
	self, err := tswebhooks.ManagerUser(ctx, mgr.GetConfig())
	if err != nil {
		return nil, err
	}
	m.log.V(2).Info("Manager-owned Workload annotations may be written by this user only", "user", self)
	tswebhooks.Register(mgr.GetWebhookServer(), self)
	if err := m.setupTimeshare(); err != nil {
		return nil, err
	}
	if err := m.setupScheduler(); err != nil {
		return nil, err
	}
	if err := m.setupEstimates(); err != nil {
		return nil, err
	}
	if features.Enabled(features.VisibilityOnDemand) {
		if err := mgr.Add(nonLeaderRunnable(m.runVisibilityServer)); err != nil {
			return nil, fmt.Errorf("adding visibility server: %w", err)
		}
	}
	return m, nil
}

// runVisibilityServer serves the pending workloads API with the positions our scheduler takes
// them in (turn order in ClusterQueues with a minAdmitDuration).
func (m *Manager) runVisibilityServer(ctx context.Context) error {
	o := tsvisibility.Options{BindPort: int(configapi.DefaultVisibilityBindPort), CertDir: m.opts.VisibilityCertDir,
		GenerateCert: internalCertsEnabled(&m.cfg), Kubeconfig: m.opts.Kubeconfig, TLS: m.tlsOpts}
	if v := m.cfg.VisibilityServer; v != nil {
		o.BindPort = int(ptr.Deref(v.BindPort, configapi.DefaultVisibilityBindPort))
		if v.BindAddress != nil {
			if o.BindAddress = net.ParseIP(*v.BindAddress); o.BindAddress == nil {
				return fmt.Errorf("visibilityServer.bindAddress: %q is not an IP address", *v.BindAddress)
			}
		}
	}
	o.Estimates = m.estimates()
	return tsvisibility.Run(ctx, m.turnOrdered(), m.kubeConfig, o)
}

// turnOrdered is the pending workloads in the order our scheduler takes them (its preemptor's
// pending order: turn order in ClusterQueues with a minAdmitDuration), as the visibility API
// shows them; upstream's scheduler takes them in the queue's order.
func (m *Manager) turnOrdered() tsvisibility.Ordered {
	ordering := workload.Ordering{PodsReadyRequeuingTimestamp: requeuingTimestamp(&m.cfg)}
	log := m.log.WithName("visibility")
	return tsvisibility.Ordered{
		Queues: m.Queues,
		Order: func(cq kueue.ClusterQueueReference, pending []*workload.Info) []*workload.Info {
			if p := m.preemptor.Load(); p != nil {
				return p.PendingOrder(log, cq, pending, ordering)
			}
			return pending
		},
	}
}

// Start runs the caches' clean-up loops and the manager until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	go m.Queues.CleanUpOnContext(ctx)
	go m.Cache.CleanUpOnContext(ctx)
	return m.Manager.Start(ctx)
}

func (m *Manager) metricsServerOptions() (metricsserver.Options, *certwatcher.CertWatcher, error) {
	if m.opts.InsecureMetrics {
		return metricsserver.Options{BindAddress: m.cfg.Metrics.BindAddress}, nil, nil
	}
	opts := metricsserver.Options{
		BindAddress:    m.cfg.Metrics.BindAddress,
		SecureServing:  true,
		FilterProvider: filters.WithAuthenticationAndAuthorization,
		TLSOpts:        tlsconfig.BuildTLSOptions(m.tlsOpts),
	}
	if internalCertsEnabled(&m.cfg) {
		return opts, nil, nil
	}
	w, err := certwatcher.New(filepath.Join(m.opts.MetricsCertDir, "tls.crt"), filepath.Join(m.opts.MetricsCertDir, "tls.key"))
	if err != nil {
		return opts, nil, fmt.Errorf("metrics certificate in %s (internalCertManagement is disabled): %w", m.opts.MetricsCertDir, err)
	}
	opts.TLSOpts = append(opts.TLSOpts, func(c *tls.Config) { c.GetCertificate = w.GetCertificate })
	return opts, w, nil
}

// Collectors live in a process-wide registry, which panics on a second call. The vectors are
// built with the custom labels before it, as Kueue's own main does.
var registerMetrics = sync.OnceFunc(func() {
	metrics.Register()
	tsmetrics.Register()
})

// customLabelsOfProcess is the custom labels the first manager of the process built.
var customLabelsOfProcess struct {
	sync.Mutex
	built   bool
	entries []configapi.ControllerMetricsCustomLabel
	labels  *metrics.CustomLabels
}

// processCustomLabels builds Kueue's custom metric labels once per process. NewCustomLabels
// rebuilds Kueue's metric vectors, and only those of the first Register are served: a manager
// started again in the same process (a restart in tests) reuses the first one's.
func processCustomLabels(entries []configapi.ControllerMetricsCustomLabel) (*metrics.CustomLabels, error) {
	p := &customLabelsOfProcess
	p.Lock()
	defer p.Unlock()
	if !p.built {
		p.built, p.entries, p.labels = true, entries, metrics.NewCustomLabels(entries)
		return p.labels, nil
	}
	if !equality.Semantic.DeepEqual(entries, p.entries) {
		return nil, fmt.Errorf("metrics.customLabels: cannot change within a running process (Kueue's metrics keep the labels they were registered with); restart the process")
	}
	return p.labels, nil
}

func (m *Manager) buildCaches(ctx context.Context) error {
	cfg := &m.cfg
	lqMetrics := metrics.NewLocalQueueMetricsConfig(cfg.Metrics.LocalQueueMetrics)
	m.lqMetrics = lqMetrics
	if features.Enabled(features.CustomMetricLabels) {
		cl, err := processCustomLabels(cfg.Metrics.CustomLabels)
		if err != nil {
			return err
		}
		m.customLabels = cl
	} else if len(cfg.Metrics.CustomLabels) > 0 {
		m.log.Info("metrics.customLabels has no effect while the CustomMetricLabels feature gate is off")
	}
	tsmetrics.InitVectors(m.customLabels)
	registerMetrics()
	m.resourceFormatter = resources.NewResourceFormatter()

	cacheOpts := []schdcache.Option{
		schdcache.WithPodsReadyTracking(blockAdmissionUntilPodsReady(cfg)),
		schdcache.WithRoleTracker(m.roleTracker),
		schdcache.WithResourceMetrics(cfg.Metrics.EnableClusterQueueResources),
		schdcache.WithCustomLabels(m.customLabels),
		schdcache.WithLocalQueueMetrics(lqMetrics),
		schdcache.WithResourceFormatter(m.resourceFormatter),
	}
	queueOpts := []qcache.Option{
		qcache.WithPodsReadyRequeuingTimestamp(requeuingTimestamp(cfg)),
		qcache.WithRoleTracker(m.roleTracker),
		qcache.WithCustomLabels(m.customLabels),
		qcache.WithLocalQueueMetrics(lqMetrics),
		qcache.WithResourceMetrics(cfg.Metrics.EnableClusterQueueResources),
		qcache.WithResourceFormatter(m.resourceFormatter),
	}
	if r := cfg.Resources; r != nil {
		if len(r.ExcludeResourcePrefixes) > 0 {
			cacheOpts = append(cacheOpts, schdcache.WithExcludedResourcePrefixes(r.ExcludeResourcePrefixes))
			queueOpts = append(queueOpts, qcache.WithExcludedResourcePrefixes(r.ExcludeResourcePrefixes))
		}
		if len(r.Transformations) > 0 {
			cacheOpts = append(cacheOpts, schdcache.WithResourceTransformations(r.Transformations))
			queueOpts = append(queueOpts, qcache.WithResourceTransformations(r.Transformations))
		}
	}

	var draMapper *dra.ResourceMapper
	var draResources *dra.ExtendedResourceCache
	if features.Enabled(features.KueueDRAIntegration) {
		draMapper = dra.NewResourceMapper()
		draResources = dra.NewExtendedResourceCache()
		if cfg.Resources != nil && len(cfg.Resources.DeviceClassMappings) > 0 {
			if err := draMapper.PopulateFromConfiguration(cfg.Resources.DeviceClassMappings); err != nil {
				return fmt.Errorf("resources.deviceClassMappings: %w", err)
			}
			for _, name := range append(draMapper.CounterBasedResourceNames(), draMapper.CapacityBasedResourceNames()...) {
				m.resourceFormatter.RegisterBinaryFormattedResource(name)
			}
		}
		queueOpts = append(queueOpts, qcache.WithDRABackedResources(draResources))
	}
	m.draMapper, m.draResources = draMapper, draResources

	if cfg.FairSharing != nil {
		cacheOpts = append(cacheOpts, schdcache.WithFairSharing(fairsharing.Enabled(cfg.FairSharing)))
	}
	if cfg.AdmissionFairSharing != nil {
		queueOpts = append(queueOpts, qcache.WithAdmissionFairSharing(cfg.AdmissionFairSharing))
		cacheOpts = append(cacheOpts, schdcache.WithAdmissionFairSharing(cfg.AdmissionFairSharing))
	}
	if features.Enabled(features.SchedulerLibraryIntegration) {
		sim, err := was.NewWASSimulator(ctx, m.GetConfig())
		if err != nil {
			return fmt.Errorf("creating the scheduling simulator: %w", err)
		}
		cacheOpts = append(cacheOpts, schdcache.WithSchedulingSimulator(sim))
	}
	m.Cache = schdcache.New(m.GetClient(), cacheOpts...)

	// Upstream's own batch period, set explicitly so that the waker's early wake-ups match it.
	requeuer := qcache.NewRequeuer(qcache.WithBatchPeriod(queuesettings.RequeueBatchPeriod()))
	if err := m.Add(requeuer); err != nil {
		return fmt.Errorf("adding the inadmissible workload requeuer: %w", err)
	}
	m.preemptionExpectations = preemptexpectations.New()
	queueOpts = append(queueOpts, qcache.WithPreemptionExpectations(m.preemptionExpectations))
	m.Queues = qcache.NewManager(m.GetClient(), m.Cache, requeuer, queueOpts...)
	return nil
}

func (m *Manager) setupIndexes(ctx context.Context, resourceSliceAPI bool) error {
	fi := m.GetFieldIndexer()
	if err := indexer.Setup(ctx, fi); err != nil {
		return err
	}
	if err := queuesettings.SetupIndexes(ctx, fi); err != nil {
		return err
	}
	if err := provisioning.ServerSupportsProvisioningRequest(m); err != nil {
		m.log.V(2).Info("Provisioning admission check disabled: the ProvisioningRequest API is not served", "reason", err.Error())
	} else if err := provisioning.SetupIndexer(ctx, fi); err != nil {
		return fmt.Errorf("provisioning: %w", err)
	}
	if features.Enabled(features.TopologyAwareScheduling) {
		if err := tasindexer.SetupIndexes(ctx, fi); err != nil {
			return fmt.Errorf("topology aware scheduling: %w", err)
		}
	}
	if features.Enabled(features.MultiKueue) {
		if err := multikueue.SetupIndexer(ctx, fi, *m.cfg.Namespace); err != nil {
			return fmt.Errorf("multikueue: %w", err)
		}
	}
	if resourceSliceAPI {
		if err := core.SetupResourceSliceIndexer(ctx, fi); err != nil {
			return fmt.Errorf("resource slices: %w", err)
		}
	}
	return jobframework.SetupIndexes(ctx, fi, jobframework.WithEnabledFrameworks(m.cfg.Integrations.Frameworks))
}

func (m *Manager) serverVersionFetcher() (*kubeversion.ServerVersionFetcher, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(m.kubeConfig)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	f := kubeversion.NewServerVersionFetcher(dc)
	if err := m.Add(f); err != nil {
		return nil, fmt.Errorf("adding server version fetcher: %w", err)
	}
	if err := f.FetchServerVersion(); err != nil {
		return nil, fmt.Errorf("reading the Kubernetes server version: %w", err)
	}
	return f, nil
}

// setupProbes reports ready only once the webhook server listens, so that clients do not hit
// webhook errors while the manager is starting.
func (m *Manager) setupProbes(certsReady <-chan struct{}) error {
	if err := m.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	err := m.AddReadyzCheck("readyz", func(req *http.Request) error {
		select {
		case <-certsReady:
			return m.GetWebhookServer().StartedChecker()(req)
		default:
			return errors.New("webhook certificates are not ready yet")
		}
	})
	if err != nil {
		return fmt.Errorf("adding ready check: %w", err)
	}
	return nil
}

func (m *Manager) setupControllers(ctx context.Context, versions *kubeversion.ServerVersionFetcher, resourceSliceAPI bool) error {
	cfg := &m.cfg
	coreOpts := core.SetupControllersOpts{
		RoleTracker:               m.roleTracker,
		PreemptionExpectations:    m.preemptionExpectations,
		CustomLabels:              m.customLabels,
		DRAMapper:                 m.draMapper,
		DRABackedResources:        m.draResources,
		ResourceFormatter:         m.resourceFormatter,
		ResourceSliceAPIAvailable: resourceSliceAPI,
	}
	if name, err := core.SetupControllers(m, m.Queues, m.Cache, cfg, coreOpts); err != nil {
		return fmt.Errorf("setting up controller %s: %w", name, err)
	}
	if features.Enabled(features.FailureRecoveryPolicy) {
		if name, err := failurerecovery.SetupControllers(m, cfg, m.roleTracker); err != nil {
			return fmt.Errorf("setting up failure recovery controller %s: %w", name, err)
		}
	}
	if provisioning.ServerSupportsProvisioningRequest(m) == nil {
		c, err := provisioning.NewController(m.GetClient(), m.GetEventRecorder("kueue-provisioning-request-controller"), m.roleTracker)
		if err != nil {
			return fmt.Errorf("creating provisioning controller: %w", err)
		}
		if err := c.SetupWithManager(m); err != nil {
			return fmt.Errorf("setting up provisioning controller: %w", err)
		}
	}
	if features.Enabled(features.MultiKueue) {
		if err := m.setupMultiKueue(); err != nil {
			return err
		}
	}
	if features.Enabled(features.TopologyAwareScheduling) {
		if name, err := tas.SetupControllers(m, m.Queues, m.Cache, cfg, m.roleTracker); err != nil {
			return fmt.Errorf("setting up topology controller %s: %w", name, err)
		}
	}
	if features.Enabled(features.ElasticJobsViaWorkloadSlices) {
		if name, err := elasticjobs.SetupWithManager(m, cfg, m.roleTracker); err != nil {
			return fmt.Errorf("setting up elastic jobs controller %s: %w", name, err)
		}
	}
	if features.Enabled(features.ConcurrentAdmission) {
		if name, err := concurrentadmission.SetupControllers(m, m.Queues, cfg, m.roleTracker); err != nil {
			return fmt.Errorf("setting up concurrent admission controller %s: %w", name, err)
		}
	}

	nsSelector, err := metav1.LabelSelectorAsSelector(cfg.ManagedJobsNamespaceSelector)
	if err != nil {
		return fmt.Errorf("managedJobsNamespaceSelector: %w", err)
	}
	labels, annotations := m.keysToCopy()
	jobOpts := []jobframework.Option{
		jobframework.WithManageJobsWithoutQueueName(cfg.ManageJobsWithoutQueueName),
		jobframework.WithWaitForPodsReady(cfg.WaitForPodsReady),
		jobframework.WithKubeServerVersion(versions),
		jobframework.WithEnabledFrameworks(cfg.Integrations.Frameworks),
		jobframework.WithEnabledExternalFrameworks(cfg.Integrations.ExternalFrameworks),
		jobframework.WithManagerName(constants.KueueName),
		jobframework.WithLabelKeysToCopy(labels),
		jobframework.WithAnnotationsToCopy(annotations),
		jobframework.WithCache(m.Cache),
		jobframework.WithQueues(m.Queues),
		jobframework.WithObjectRetentionPolicies(cfg.ObjectRetentionPolicies),
		jobframework.WithRoleTracker(m.roleTracker),
		jobframework.WithCustomLabels(m.customLabels),
		jobframework.WithManagedJobsNamespaceSelector(nsSelector),
	}
	if err := jobframework.SetupControllers(ctx, m, m.log, jobOpts...); err != nil {
		return fmt.Errorf("setting up job integrations: %w", err)
	}
	return nil
}

func (m *Manager) setupMultiKueue() error {
	cfg := &m.cfg
	adapters, err := jobframework.GetMultiKueueAdapters(sets.New(cfg.Integrations.Frameworks...))
	if err != nil {
		return fmt.Errorf("multikueue adapters: %w", err)
	}
	if features.Enabled(features.MultiKueueAdaptersForCustomJobs) && cfg.MultiKueue != nil && len(cfg.MultiKueue.ExternalFrameworks) > 0 {
		external, err := externalframeworks.NewAdapters(cfg.MultiKueue.ExternalFrameworks)
		if err != nil {
			return fmt.Errorf("multiKueue.externalFrameworks: %w", err)
		}
		for _, a := range external {
			adapters[a.GVK().String()] = a
		}
	}
	mk := cfg.MultiKueue
	err = multikueue.SetupControllers(m, *cfg.Namespace,
		multikueue.WithGCInterval(mk.GCInterval.Duration),
		multikueue.WithOrigin(ptr.Deref(mk.Origin, configapi.DefaultMultiKueueOrigin)),
		multikueue.WithWorkerLostTimeout(mk.WorkerLostTimeout.Duration),
		multikueue.WithAdapters(adapters),
		multikueue.WithDispatcherName(ptr.Deref(mk.DispatcherName, configapi.MultiKueueDispatcherModeAllAtOnce)),
		multikueue.WithClusterProfiles(mk.ClusterProfile),
		multikueue.WithRoleTracker(m.roleTracker),
	)
	if err != nil {
		return fmt.Errorf("setting up multikueue controllers: %w", err)
	}
	if name, err := workloaddispatcher.SetupControllers(m, cfg, m.roleTracker); err != nil {
		return fmt.Errorf("setting up multikueue dispatcher %s: %w", name, err)
	}
	return nil
}

// keysToCopy lists the job labels and annotations copied onto Workloads: the configured
// label keys, plus whatever custom metric labels read.
func (m *Manager) keysToCopy() (labels, annotations sets.Set[string]) {
	labels = sets.New(m.cfg.Integrations.LabelKeysToCopy...)
	if !features.Enabled(features.CustomMetricLabels) {
		return labels, sets.New[string]()
	}
	metricLabels, annotations := metrics.WorkloadCustomLabelSources(m.cfg.Metrics.CustomLabels)
	return labels.Union(metricLabels), annotations
}

func (m *Manager) setupScheduler() error {
	cfg := &m.cfg
	queues, cache, cl, recorder := m.Queues, m.Cache, m.GetClient(), m.GetEventRecorder(constants.AdmissionName)
	if m.opts.ClientWrapper != nil {
		cl = m.opts.ClientWrapper(cl)
	}
	var s manager.Runnable
	if m.opts.UpstreamScheduler {
		s = upstreamscheduler.New(queues, cache, cl, recorder,
			upstreamscheduler.WithPodsReadyRequeuingTimestamp(requeuingTimestamp(cfg)),
			upstreamscheduler.WithFairSharing(cfg.FairSharing),
			upstreamscheduler.WithAdmissionFairSharing(cfg.AdmissionFairSharing),
			upstreamscheduler.WithQuotaCheckStrategy(quotaCheckStrategy(cfg)),
			upstreamscheduler.WithRoleTracker(m.roleTracker),
			upstreamscheduler.WithPreemptionExpectations(m.preemptionExpectations),
			upstreamscheduler.WithCustomLabels(m.customLabels),
			upstreamscheduler.WithResourceFormatter(m.resourceFormatter),
		)
	} else {
		opts := []scheduler.Option{
			scheduler.WithPodsReadyRequeuingTimestamp(requeuingTimestamp(cfg)),
			scheduler.WithFairSharing(cfg.FairSharing),
			scheduler.WithAdmissionFairSharing(cfg.AdmissionFairSharing),
			scheduler.WithQuotaCheckStrategy(quotaCheckStrategy(cfg)),
			scheduler.WithRoleTracker(m.roleTracker),
			scheduler.WithPreemptionExpectations(m.preemptionExpectations),
			scheduler.WithCustomLabels(m.customLabels),
			scheduler.WithResourceFormatter(m.resourceFormatter),
			scheduler.WithPreemptor(m.keepPreemptor(PreemptorFactory(m.settings, m.sources, m.Queues, m.timeshareCfg.DefaultRequeueDelay.Duration,
				preemption.WithRuntimeClock(policy.RuntimeClock(m.timeshareCfg.RuntimeClock)), preemption.WithWorkloadIndex(m.workloadIndex)))),
			scheduler.WithAPIReader(m.GetAPIReader()),
			scheduler.WithTimeSource(m.opts.Clock),
			scheduler.WithHeadsPerCycle(headsPerCycle(cfg, &m.timeshareCfg)),
			scheduler.WithPendingStatusWriters(int(ptr.Deref(m.timeshareCfg.PendingStatusWriters, 0))),
			scheduler.WithHandoverHoldBound(m.timeshareCfg.MaxHandoverHold.Duration),
			scheduler.WithQueueWaker(func(ctx context.Context, cq kueue.ClusterQueueReference) {
				queuesettings.Wake(ctx, cl, queues, cq, ctrl.LoggerFrom(ctx))
			}, queuesettings.RequeueBatchPeriod()),
		}
		sched := scheduler.New(queues, cache, cl, recorder, opts...)
		m.scheduler.Store(sched)
		if plugins.Units().Marking(policy.GateOn) {
			if err := m.Add(nonLeaderRunnable(m.watchMarks)); err != nil {
				return fmt.Errorf("adding the marked-workload watch of the preemptor: %w", err)
			}
		}
		if slices.Contains(cfg.Integrations.Frameworks, "batch/job") {
			if err := m.Add(nonLeaderRunnable(func(ctx context.Context) error { return m.watchJobs(ctx, sched) })); err != nil {
				return fmt.Errorf("adding the Job watch of the scheduler: %w", err)
			}
		}
		s = m.afterSettingsLoaded(sched)
	}
	if err := m.Add(s); err != nil {
		return fmt.Errorf("adding scheduler: %w", err)
	}
	return nil
}

// watchMarks keeps the preemptor's index of marked workloads from the Workload informer; until
// its initial list is delivered the preemptor reads every workload instead.
func (m *Manager) watchMarks(ctx context.Context) error {
	inf, err := m.GetCache().GetInformer(ctx, &kueue.Workload{})
	if err != nil {
		return fmt.Errorf("watching Workloads for marks: %w", err)
	}
	observe := func(obj any) {
		if wl, ok := obj.(*kueue.Workload); ok {
			m.workloadIndex.Observe(wl)
		}
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if wl, ok := obj.(*kueue.Workload); ok {
				m.workloadIndex.Forget(workload.Key(wl))
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching Workloads for notices: %w", err)
	}
	m.workloadIndex.SetSynced(reg.HasSynced)
	defer func() {
		m.workloadIndex.SetSynced(nil)
		_ = inf.RemoveEventHandler(reg)
	}()
	<-ctx.Done()
	return nil
}

// watchJobs tells the scheduler when a Job's Pods change, so that a ClusterQueue waiting for a
// preempted Job's Pods to terminate is retried as soon as they are gone.
func (m *Manager) watchJobs(ctx context.Context, sched *scheduler.Scheduler) error {
	inf, err := m.GetCache().GetInformer(ctx, &batchv1.Job{})
	if err != nil {
		return fmt.Errorf("watching Jobs: %w", err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if job, ok := obj.(*batchv1.Job); ok {
				sched.JobChanged(ctx, job)
			}
		},
	})
	if err != nil {
		return fmt.Errorf("watching Jobs: %w", err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	// The Pods end a hold up to a second before their Job's status does. Kueue's topology-aware
	// scheduling controllers keep the same informer.
	if tsfeatures.Enabled(tsfeatures.HandoverAfterVictimTermination) {
		pods, err := m.GetCache().GetInformer(ctx, &corev1.Pod{})
		if err != nil {
			return fmt.Errorf("watching Pods: %w", err)
		}
		podReg, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) {
				if pod, ok := obj.(*corev1.Pod); ok {
					sched.PodChanged(ctx, pod, false)
				}
			},
			DeleteFunc: func(obj any) {
				if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				if pod, ok := obj.(*corev1.Pod); ok {
					sched.PodChanged(ctx, pod, true)
				}
			},
		})
		if err != nil {
			return fmt.Errorf("watching Pods: %w", err)
		}
		defer func() { _ = pods.RemoveEventHandler(podReg) }()
	}
	<-ctx.Done()
	return nil
}

// afterSettingsLoaded starts s only once every ClusterQueue's and Cohort's settings and the units'
// cluster sources (the priority classes' tolerations) are loaded, retrying while the API server
// cannot be read, and the scheduler's cache counts every workload holding quota
// (waitForQuotaLoaded, at most loadBound). It keeps s's leader election needs.
func (m *Manager) afterSettingsLoaded(s manager.Runnable) manager.Runnable {
	return manager.RunnableFunc(func(ctx context.Context) error {
		backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 10 * time.Second}
		err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			err := m.settings.Load(ctx, m.GetAPIReader())
			if err == nil {
				err = policy.LoadSources(ctx, m.sources, m.GetAPIReader())
			}
			// The budgets' ledger is in memory: rebuilt before the first preemption.
			if err == nil && policy.GateOn(budget.Feature) {
				err = m.settings.LoadPreemptions(ctx, m.GetAPIReader())
			}
			if err != nil {
				m.log.Error(err, "Could not load kueue-timeshare settings; the scheduler waits")
				return false, nil
			}
			return true, nil
		})
		if err != nil {
			return nil // ctx ended
		}
		if !waitForQuotaLoaded(ctx, m.GetCache(), m.Cache, loadBound) && ctx.Err() == nil {
			m.log.Info("The scheduler's cache does not count every workload holding quota yet; scheduling anyway", "waited", loadBound)
		}
		return s.Start(ctx)
	})
}

// nonLeaderRunnable runs on every replica, leader or not.
type nonLeaderRunnable func(context.Context) error

func (f nonLeaderRunnable) Start(ctx context.Context) error { return f(ctx) }
func (nonLeaderRunnable) NeedLeaderElection() bool          { return false }

var _ manager.LeaderElectionRunnable = nonLeaderRunnable(nil)
