// Package jobowner reads the job that owns a Workload, as far as a tenant-written owner reference
// may be trusted.
package jobowner

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/kueue/pkg/controller/jobframework"
)

// Of reads wl's controlling job: nil when there is none, when its kind is not one of the job
// integrations enabled in Kueue's configuration, when it cannot be read (gone, or no access), or
// when the object of that name is not the one the reference names (another UID). The ownerReference
// is tenant-written: only integrated kinds, which are namespaced, are read, in wl's namespace, and
// through the manager's informers (the same ones Kueue's job reconcilers watch), not a live GET.
func Of(ctx context.Context, c client.Reader, wl *kueue.Workload) (client.Object, error) {
	ref := metav1.GetControllerOf(wl)
	if ref == nil {
		return nil, nil
	}
	job := jobframework.GetEmptyOwnerObject(ref)
	if job == nil {
		return nil, nil
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: ref.Name}, job); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, err
	}
	if job.GetUID() != ref.UID {
		return nil, nil
	}
	return job, nil
}
