// Package visibility serves Kueue's visibility API (visibility.kueue.x-k8s.io, the pending
// workloads of ClusterQueues and LocalQueues) with the positions our scheduler takes them in.
// Upstream's server reads upstream's queue order straight from its queue manager; in a
// ClusterQueue that takes time-sharing turns that order is not the one workloads are admitted in.
package visibility

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/compatibility"
	"k8s.io/component-base/version"

	generatedopenapi "sigs.k8s.io/kueue/apis/visibility/openapi"
	visibilityv1beta1 "sigs.k8s.io/kueue/apis/visibility/v1beta1"
	visibilityv1beta2 "sigs.k8s.io/kueue/apis/visibility/v1beta2"
	"sigs.k8s.io/kueue/pkg/util/tlsconfig"
)

// DefaultCertDir is where Kueue's deployment mounts (or the manager writes) the server's certificate.
const DefaultCertDir = "/visibility"

// Options say where and how the server listens.
type Options struct {
	// BindAddress and BindPort are where it listens; a nil address means every interface.
	BindAddress net.IP
	BindPort    int
	// CertDir holds tls.crt and tls.key. With GenerateCert the server writes a self-signed pair
	// there (apiserver.crt and apiserver.key) unless one is already there.
	CertDir      string
	GenerateCert bool
	// Kubeconfig is the file the server uses to delegate authentication and authorization to the
	// cluster's API server; empty means the in-cluster configuration.
	Kubeconfig string
	// TLS, when set, restricts TLS versions, ciphers and curves.
	TLS *tlsconfig.TLS
	// Estimates, when set, adds each pending workload's admission estimate to its annotations.
	Estimates Estimates
}

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
)

func init() {
	utilruntime.Must(visibilityv1beta2.AddToScheme(scheme))
	utilruntime.Must(visibilityv1beta1.AddToScheme(scheme))
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
}

// Run serves the API until ctx ends. kubeConfig is the manager's connection to the cluster; the
// server's informers (API priority and fairness) use it.
func Run(ctx context.Context, pending Pending, kubeConfig *rest.Config, o Options) error {
	cfg, err := serverConfig(kubeConfig, o)
	if err != nil {
		return fmt.Errorf("configuring the visibility server: %w", err)
	}
	server, err := cfg.Complete().New("kueue-timeshare-visibility", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return fmt.Errorf("creating the visibility server: %w", err)
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(visibilityv1beta2.SchemeGroupVersion.Group, scheme, runtime.NewParameterCodec(scheme), codecs)
	// Both versions have the same resources; the v1beta2 objects are converted for v1beta1 clients.
	group.PrioritizedVersions = []schema.GroupVersion{visibilityv1beta2.SchemeGroupVersion, visibilityv1beta1.SchemeGroupVersion}
	for _, gv := range group.PrioritizedVersions {
		group.VersionedResourcesStorageMap[gv.Version] = Storage(pending, o.Estimates)
	}
	if err := server.InstallAPIGroup(&group); err != nil {
		return fmt.Errorf("installing %s: %w", visibilityv1beta2.SchemeGroupVersion.Group, err)
	}
	return server.PrepareRun().RunWithContext(ctx)
}

func serverConfig(kubeConfig *rest.Config, o Options) (*genericapiserver.RecommendedConfig, error) {
	cfg := genericapiserver.NewRecommendedConfig(codecs)
	// Kubernetes version of the libraries this binary is built with, without pre-release suffixes.
	v := strings.SplitN(version.Get().String(), "-", 2)[0]
	cfg.EffectiveVersion = compatibility.NewEffectiveVersionFromString(v, "", "")
	namer := openapinamer.NewDefinitionNamer(scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	for _, info := range []*string{&cfg.OpenAPIConfig.Info.Title, &cfg.OpenAPIV3Config.Info.Title} {
		*info = "kueue-timeshare visibility server"
	}
	cfg.OpenAPIConfig.Info.Version, cfg.OpenAPIV3Config.Info.Version = v, v
	cfg.EnableMetrics = true

	// The API only reads the queue manager: no storage and no admission; the core API client
	// comes from the manager's own connection rather than from a kubeconfig file.
	opts := genericoptions.NewRecommendedOptions("", codecs.LegacyCodec(visibilityv1beta2.SchemeGroupVersion, visibilityv1beta1.SchemeGroupVersion))
	opts.Etcd, opts.Admission, opts.CoreAPI = nil, nil, nil
	opts.Authentication.RemoteKubeConfigFile = o.Kubeconfig
	opts.Authorization.RemoteKubeConfigFile = o.Kubeconfig
	serving := opts.SecureServing
	serving.BindPort = o.BindPort
	if o.BindAddress != nil {
		serving.BindAddress = o.BindAddress
	}
	if o.GenerateCert {
		serving.ServerCert.CertDirectory = o.CertDir
	} else {
		serving.ServerCert.CertKey.CertFile = filepath.Join(o.CertDir, "tls.crt")
		serving.ServerCert.CertKey.KeyFile = filepath.Join(o.CertDir, "tls.key")
	}
	if err := serving.MaybeDefaultWithSelfSignedCerts("localhost", nil, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("self-signed certificate: %w", err)
	}

	cfg.ClientConfig = rest.CopyConfig(kubeConfig)
	clientset, err := kubernetes.NewForConfig(cfg.ClientConfig)
	if err != nil {
		return nil, err
	}
	cfg.SharedInformerFactory = informers.NewSharedInformerFactory(clientset, 10*time.Minute)
	if err := opts.ApplyTo(cfg); err != nil {
		return nil, err
	}
	if o.TLS != nil && cfg.SecureServing != nil {
		cfg.SecureServing.MinTLSVersion = o.TLS.MinVersion
		cfg.SecureServing.CipherSuites = o.TLS.CipherSuites
		cfg.SecureServing.CurvePreferences = o.TLS.CurvePreferences
	}
	return cfg, nil
}
