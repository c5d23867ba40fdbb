package manager

import (
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/runtime"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	inventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	configv1beta1 "sigs.k8s.io/kueue/apis/config/v1beta1"
	configv1beta2 "sigs.k8s.io/kueue/apis/config/v1beta2"
	kueuev1alpha1 "sigs.k8s.io/kueue/apis/kueue/v1alpha1"
	kueuev1beta1 "sigs.k8s.io/kueue/apis/kueue/v1beta1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"

	// Registers every job integration shipped by upstream (batch/v1 Job, JobSet, Kubeflow, Ray, ...).
	_ "sigs.k8s.io/kueue/pkg/controller/jobs"

	// Registers our feature gates before any configuration is read.
	_ "github.com/kueue-timeshare/kueue-timeshare/pkg/features"
)

// NewScheme returns a scheme that knows every type the manager reads or writes:
// core Kubernetes, Kueue's API and configuration groups, and each registered job integration.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	adders := []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		schedulingv1.AddToScheme,
		resourcev1.AddToScheme,
		kueuev1beta2.AddToScheme,
		kueuev1beta1.AddToScheme,
		kueuev1alpha1.AddToScheme,
		configv1beta2.AddToScheme,
		configv1beta1.AddToScheme,
		autoscalingv1.AddToScheme,
		inventoryv1alpha1.AddToScheme,
	}
	for _, add := range adders {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	err := jobframework.ForEachIntegration(func(_ string, cb jobframework.IntegrationCallbacks) error {
		if cb.AddToScheme == nil {
			return nil
		}
		return cb.AddToScheme(s)
	})
	return s, err
}
