package util

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueue-timeshare/kueue-timeshare/pkg/controlplane"
)

// KueueRoles reads every ClusterRole of config/default/user-roles.yaml, the user-facing roles the
// chart installs (Kueue's batch-admin and batch-user and the roles they aggregate).
func KueueRoles() ([]*rbacv1.ClusterRole, error) {
	root, err := controlplane.FindRoot()
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, "config", "default", "user-roles.yaml"))
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*rbacv1.ClusterRole
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		out = append(out, &role)
	}
}

// KueueRole creates "tenant-test-<name>", a copy of the user-facing ClusterRole name (KueueRoles),
// unless it exists, and returns it.
func (e *Env) KueueRole(ctx context.Context, name string) (*rbacv1.ClusterRole, error) {
	roles, err := KueueRoles()
	if err != nil {
		return nil, err
	}
	for _, role := range roles {
		if role.Name != name {
			continue
		}
		role.Name = "tenant-test-" + role.Name
		if err := e.Client.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		return role, nil
	}
	return nil, fmt.Errorf("no ClusterRole %s in config/default/user-roles.yaml", name)
}

// Tenant binds user to role in ns and returns a client that acts as that user, authorized by the
// API server's RBAC and admitted by the manager's webhooks over TLS.
func (e *Env) Tenant(ctx context.Context, ns, user string, role *rbacv1.ClusterRole) (client.Client, error) {
	if err := e.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(e.ControlPlane.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return client.New(cfg, client.Options{Scheme: e.Scheme})
}
