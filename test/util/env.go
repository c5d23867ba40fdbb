// Package util starts the pieces integration suites share: a local control plane and the
// kueue-timeshare manager running in the test process against it.
package util

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/manager"
)

// Env is a control plane with a manager attached.
type Env struct {
	ControlPlane *controlplane.ControlPlane
	Manager      *manager.Manager
	Client       client.Client
	Scheme       *runtime.Scheme

	// VisibilityConfig reaches the visibility API server as the control plane's admin, when
	// Settings.Visibility runs one.
	VisibilityConfig *rest.Config

	cancel     context.CancelFunc
	stopped    chan error
	cfgFile    string
	kubeconfig string
	settings   Settings
}

// Settings tune the manager a suite runs.
type Settings struct {
	// FeatureGates are added to the ones a local control plane needs.
	FeatureGates map[string]bool
	// ConfigExtra is appended to the Kueue Configuration (top-level YAML keys).
	ConfigExtra string
	// MetricsExtra is appended to the configuration's metrics section (controlplane.ManagerSettings).
	MetricsExtra string
	Log          logr.Logger
	// UpstreamScheduler runs upstream's scheduler instead of ours (manager.Options).
	UpstreamScheduler bool
	// Clock replaces our scheduler's clock (manager.Options).
	Clock clock.Clock
	// ClientWrapper wraps the scheduler's client (manager.Options), to inject API faults.
	ClientWrapper func(client.Client) client.Client
	// Visibility runs the visibility API server (VisibilityOnDemand) at Env.VisibilityConfig.
	Visibility bool
	// Pods, when set, runs the control plane as a cluster with Pods (kube-controller-manager,
	// kube-scheduler, simulated Nodes): see controlplane.Options.
	Pods *controlplane.PodsOptions
}

// Start brings up the control plane and runs the manager until Stop. The manager is built from a
// configuration file, exactly as the binary builds it.
func Start(s Settings) (*Env, error) {
	root, err := controlplane.FindRoot()
	if err != nil {
		return nil, err
	}
	cp, err := controlplane.StartWith(root, controlplane.Options{Pods: s.Pods})
	if err != nil {
		return nil, err
	}
	e := &Env{ControlPlane: cp}
	ok := false
	defer func() {
		if !ok {
			_ = cp.Stop()
		}
	}()

	cfgFile := filepath.Join(cp.ServingCertDir(), "kueue-config.yaml")
	e.cfgFile, e.settings = cfgFile, s
	var visibilityAddress string
	if s.Visibility {
		// The server delegates authentication and authorization to kube-apiserver through a file.
		e.kubeconfig = filepath.Join(cp.ServingCertDir(), "admin.kubeconfig")
		if err := cp.WriteAdminKubeconfig(e.kubeconfig); err != nil {
			return nil, err
		}
		if visibilityAddress, err = controlplane.FreeLoopbackAddress(); err != nil {
			return nil, err
		}
		e.VisibilityConfig = rest.CopyConfig(cp.Config)
		e.VisibilityConfig.Host = "https://" + visibilityAddress
		e.VisibilityConfig.CAData, e.VisibilityConfig.CAFile = cp.ServingCA(), ""
	}
	if err := e.writeConfig(visibilityAddress); err != nil {
		return nil, err
	}
	if e.Scheme, err = manager.NewScheme(); err != nil {
		return nil, err
	}
	if err := e.startManager(); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(cp.Config, client.Options{Scheme: e.Scheme}); err != nil {
		e.cancel()
		return nil, err
	}
	ok = true
	return e, nil
}

func (e *Env) writeConfig(visibilityAddress string) error {
	text := e.ControlPlane.ManagerConfig(controlplane.ManagerSettings{MetricsAddress: "0", HealthAddress: "0",
		FeatureGates: e.settings.FeatureGates, VisibilityAddress: visibilityAddress, Extra: e.settings.ConfigExtra, MetricsExtra: e.settings.MetricsExtra})
	return os.WriteFile(e.cfgFile, []byte(text), 0o600)
}

// Reconfigure restarts the manager with extra as Settings.ConfigExtra, unless that is already
// its configuration: for suites whose parts need different manager settings.
func (e *Env) Reconfigure(extra string) error {
	if extra == e.settings.ConfigExtra {
		return nil
	}
	e.settings.ConfigExtra = extra
	var visibilityAddress string
	if e.VisibilityConfig != nil {
		visibilityAddress = strings.TrimPrefix(e.VisibilityConfig.Host, "https://")
	}
	if err := e.writeConfig(visibilityAddress); err != nil {
		return err
	}
	return e.RestartManager()
}

// startManager builds a manager from the configuration file and runs it until stopManager.
func (e *Env) startManager() error {
	ctrlOpts, cfg, err := manager.LoadConfig(e.Scheme, e.cfgFile, "")
	if err != nil {
		return err
	}
	// A suite may run several managers one after the other in its process; controller names
	// only have to be unique within one.
	ctrlOpts.Controller.SkipNameValidation = ptr.To(true)
	ctx, cancel := context.WithCancel(context.Background())
	s := e.settings
	m, err := manager.New(ctx, e.ControlPlane.Config, ctrlOpts, cfg, manager.Options{InsecureMetrics: true, Log: s.Log,
		VisibilityCertDir: e.ControlPlane.ServingCertDir(), Kubeconfig: e.kubeconfig, UpstreamScheduler: s.UpstreamScheduler, Clock: s.Clock, ClientWrapper: s.ClientWrapper})
	if err != nil {
		cancel()
		return err
	}
	e.Manager, e.cancel = m, cancel
	e.stopped = make(chan error, 1)
	go func() { e.stopped <- m.Start(ctx) }()
	if err := waitForWebhooks(ctx, m, e.stopped); err != nil {
		cancel()
		return err
	}
	return nil
}

func (e *Env) stopManager() {
	e.cancel()
	select {
	case <-e.stopped:
	case <-time.After(30 * time.Second):
	}
}

// RestartManager stops the manager and starts a new one against the same control plane, as
// after a crash or an upgrade: everything it knows must come back from the API.
func (e *Env) RestartManager() error {
	e.stopManager()
	return e.startManager()
}

func waitForWebhooks(ctx context.Context, m *manager.Manager, stopped <-chan error) error {
	checker := m.GetWebhookServer().StartedChecker()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-stopped:
			return fmt.Errorf("manager stopped while starting: %w", err)
		default:
		}
		if checker(nil) == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("webhook server not serving after a minute")
}

// Stop ends the manager, then the control plane.
func (e *Env) Stop() error {
	e.stopManager()
	return e.ControlPlane.Stop()
}

// FireDue steps clk by nothing every interval until stop is closed. The fake clock fires a timer
// only when it is stepped, even one set after its end already passed: the manager may set one
// after the test stepped past it (on a busy machine, late), which then fires at once, as on a
// real clock, instead of waiting for the test's next step.
func FireDue(clk *clocktesting.FakeClock, every time.Duration, stop <-chan struct{}) {
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				clk.Step(0)
			}
		}
	}()
}

// KeepAhead moves clk up to a minute past the real time when it runs behind that. The API server
// stamps creation times by the real clock, the manager stamps conditions by clk, and the turn
// order compares the two: behind, a workload rotated out would count as waiting since before
// others were created. The minute covers the objects a spec creates before it steps clk, on a
// busy machine.
func KeepAhead(clk *clocktesting.FakeClock) {
	if ahead := time.Now().Truncate(time.Second).Add(time.Minute); clk.Now().Before(ahead) {
		clk.SetTime(ahead)
	}
}
