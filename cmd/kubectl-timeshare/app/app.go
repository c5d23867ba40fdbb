// Package app is the kubectl-timeshare plugin: read-only views of turns, protections and waits,
// computed with the manager's own resolution and timing functions.
package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/simulator"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/version"
)

// Streams are where a command reads and writes.
type Streams struct {
	Out, ErrOut io.Writer
}

// Options replace what the command line would give; for running the commands in-process.
type Options struct {
	// Config, when set, is used instead of the kubeconfig flags.
	Config *rest.Config
	// VisibilityConfig, when set, reaches the visibility API (default: through the API server).
	VisibilityConfig *rest.Config
	// Now is the clock that "protected until" and "turn ends" are compared with (default time.Now).
	Now func() time.Time
}

// Run runs kubectl-timeshare with args (without the program name) and returns its exit code.
func Run(ctx context.Context, args []string, streams Streams, opts Options) int {
	cmd := NewCommand(ctx, streams, opts)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
		return 1
	}
	return 0
}

// flags are the command line settings every subcommand shares.
type flags struct {
	overrides     clientcmd.ConfigOverrides
	kubeconfig    string
	output        string
	managerConfig string
	visServer     string
	visCA         string
}

// NewCommand builds the command tree.
func NewCommand(ctx context.Context, streams Streams, opts Options) *cobra.Command {
	f := &flags{}
	root := &cobra.Command{
		Use:           "kubectl-timeshare",
		Short:         "Show kueue-timeshare's turns, protections and waits (read-only)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	pf := root.PersistentFlags()
	pf.StringVar(&f.kubeconfig, "kubeconfig", "", "Path to the kubeconfig file to use.")
	clientcmd.BindOverrideFlags(&f.overrides, pf, clientcmd.ConfigOverrideFlags{
		AuthOverrideFlags:    clientcmd.RecommendedAuthOverrideFlags(""),
		ClusterOverrideFlags: clientcmd.RecommendedClusterOverrideFlags(""),
		ContextOverrideFlags: clientcmd.RecommendedContextOverrideFlags(""),
		CurrentContext:       clientcmd.FlagInfo{LongName: "context", Description: "The name of the kubeconfig context to use."},
		Timeout:              clientcmd.FlagInfo{LongName: "request-timeout", Default: "0", Description: "How long to wait for a single server request (e.g. 1s, 2m); 0 waits forever."},
	})
	pf.StringVarP(&f.output, "output", "o", "", "Output format: one of json, yaml, wide (default: tables).")
	pf.StringVar(&f.managerConfig, "manager-config", "", "The manager's configuration file, to know its timeshare defaults (defaultPreemptMinRuntime, defaultReclaimMinRuntime, reclaimResolveMethod, runtimeClock).")
	pf.StringVar(&f.visServer, "visibility-server", "", "URL of the visibility API server when the API server does not route visibility.kueue.x-k8s.io to it (as with make run).")
	pf.StringVar(&f.visCA, "visibility-certificate-authority", "", "CA file that signed the --visibility-server certificate.")

	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, the Kueue release it is built on and its commit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(streams.Out, version.Get().StringFor("kubectl-timeshare"))
			return err
		},
	})
	root.AddCommand(&cobra.Command{
		Use:   "queues [CLUSTERQUEUE]",
		Short: "Settings in force, holders with their protections and turns, and the pending order of each ClusterQueue",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := f.env(opts)
			if err != nil {
				return err
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			rep, err := env.queues(ctx, name)
			if err != nil {
				return err
			}
			return f.print(streams.Out, rep, func(w io.Writer, wide bool) error { return RenderQueues(w, rep, wide, env.now) })
		},
	})
	explain := &cobra.Command{Use: "explain", Short: "Explain an object's history and the rule that decided its fate"}
	explain.AddCommand(&cobra.Command{
		Use:   "workload NAME",
		Short: "A Workload's reservations, evictions and requeues, and the rule behind its last preemption or its wait",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := f.env(opts)
			if err != nil {
				return err
			}
			rep, err := env.explainWorkload(ctx, env.namespace, args[0])
			if err != nil {
				return err
			}
			return f.print(streams.Out, rep, func(w io.Writer, wide bool) error { return RenderExplain(w, rep, wide, env.now) })
		},
	})
	root.AddCommand(explain)
	wf := whatIfFlags{}
	whatIf := &cobra.Command{
		Use:   "what-if -f PROPOSED.yaml [CLUSTERQUEUE]",
		Short: "Run the live cluster forward in the simulator with today's settings and with proposed ones, side by side",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			env, err := f.env(opts)
			if err != nil {
				return err
			}
			only := ""
			if len(args) == 1 {
				only = args[0]
			}
			rep, err := env.whatIf(ctx, wf, only)
			if err != nil {
				return err
			}
			return f.print(streams.Out, rep, func(w io.Writer, wide bool) error { return RenderWhatIf(w, rep, wide) })
		},
	}
	whatIf.Flags().StringVarP(&wf.file, "filename", "f", "", "The proposed ClusterQueue and Cohort manifests and/or manager configuration (YAML documents or a List).")
	whatIf.Flags().DurationVar(&wf.horizon, "for", 24*time.Hour, "How far ahead to simulate.")
	whatIf.Flags().DurationVar(&wf.assumeRuntime, "assume-runtime", 0, "Run time of workloads without a kueue-timeshare.io/expected-runtime annotation (default: the median of the finished workloads in the cluster).")
	whatIf.Flags().StringVar(&wf.saveScenario, "save-scenario", "", "Also write the snapshot as a scenario file for kueue-timeshare simulate.")
	root.AddCommand(whatIf)
	return root
}

// checkOutput refuses an unknown -o before anything is read.
func (f *flags) checkOutput() error {
	switch f.output {
	case "", "wide", "json", "yaml":
		return nil
	}
	return fmt.Errorf("unable to match a printer suitable for the output format %q, allowed formats are: json, yaml, wide", f.output)
}

func (f *flags) print(out io.Writer, v any, table func(io.Writer, bool) error) error {
	switch f.output {
	case "json":
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, string(b))
		return err
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	return table(out, f.output == "wide")
}

// env is what a command reads the cluster with.
type env struct {
	client     client.Reader
	visibility *rest.Config
	namespace  string
	manager    ManagerSettings
	now        time.Time
}

// ManagerSettings are the manager's timeshare settings as far as the plugin knows them.
type ManagerSettings struct {
	// Known is false without --manager-config: defaults are not in the API.
	Known  bool
	Config tsconfig.Configuration
	// FeatureGates are the file's featureGates (the manager's --feature-gates flag, which
	// overrides them, is not known here).
	FeatureGates map[string]bool
	// FairSharing is the file's fairSharing section (present: fair sharing is on).
	FairSharing *simulator.FairSharing
}

// gateOff reports whether the manager configuration turns gate off.
func (m ManagerSettings) gateOff(gate string) bool {
	on, set := m.FeatureGates[gate]
	return set && !on
}

func (f *flags) env(opts Options) (*env, error) {
	if err := f.checkOutput(); err != nil {
		return nil, err
	}
	e := &env{now: time.Now()}
	if opts.Now != nil {
		e.now = opts.Now()
	}
	var err error
	if e.manager, err = LoadManagerSettings(f.managerConfig); err != nil {
		return nil, err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &f.overrides)
	cfg := opts.Config
	if cfg == nil {
		if cfg, err = loader.ClientConfig(); err != nil {
			return nil, err
		}
	}
	if e.namespace, _, err = loader.Namespace(); err != nil || f.overrides.Context.Namespace != "" {
		e.namespace = f.overrides.Context.Namespace
	}
	if e.namespace == "" {
		e.namespace = corev1.NamespaceDefault
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, kueue.AddToScheme, eventsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	if e.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	e.visibility = cfg
	switch {
	case opts.VisibilityConfig != nil:
		e.visibility = opts.VisibilityConfig
	case f.visServer != "":
		e.visibility = rest.CopyConfig(cfg)
		e.visibility.Host = f.visServer
		e.visibility.CAData, e.visibility.CAFile = nil, f.visCA
	}
	return e, nil
}

// LoadManagerSettings reads the timeshare section of the manager's configuration file, with the
// manager's own decoder, defaults and validation; path "" means not known.
func LoadManagerSettings(path string) (ManagerSettings, error) {
	if path == "" {
		return ManagerSettings{}, nil
	}
	content, err := os.ReadFile(path)
	if err != nil {
		return ManagerSettings{}, fmt.Errorf("--manager-config: %w", err)
	}
	m, err := parseManagerSettings(content)
	if err != nil {
		return ManagerSettings{}, fmt.Errorf("--manager-config %s: %w", path, err)
	}
	return m, nil
}

// managerSettingsFromJSON reads the timeshare section and featureGates of a manager configuration
// given as JSON, with the manager's own decoder, defaults and validation.
func managerSettingsFromJSON(doc []byte) (ManagerSettings, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return ManagerSettings{}, fmt.Errorf("the file must hold one YAML object: %w", err)
	}
	c, err := tsconfig.Decode(top[tsconfig.SectionKey])
	if err != nil {
		return ManagerSettings{}, err
	}
	tsconfig.SetDefaults(&c)
	if errs := tsconfig.Validate(&c); len(errs) > 0 {
		return ManagerSettings{}, errs.ToAggregate()
	}
	var gates map[string]bool
	if raw, ok := top["featureGates"]; ok {
		if err := json.Unmarshal(raw, &gates); err != nil {
			return ManagerSettings{}, fmt.Errorf("featureGates: %w", err)
		}
	}
	var fs *simulator.FairSharing
	if raw, ok := top["fairSharing"]; ok && string(raw) != "null" {
		fs = &simulator.FairSharing{}
		if err := json.Unmarshal(raw, fs); err != nil {
			return ManagerSettings{}, fmt.Errorf("fairSharing: %w", err)
		}
	}
	return ManagerSettings{Known: true, Config: c, FeatureGates: gates, FairSharing: fs}, nil
}
