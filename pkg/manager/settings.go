package manager

import (
	tsconfig "github.com/kueue-timeshare/kueue-timeshare/apis/config/v1alpha1"
	"github.com/kueue-timeshare/kueue-timeshare/pkg/queuesettings"
)

// NewSettingsStore is the ClusterQueue settings store of a timeshare configuration, with its
// defaults: the manager's, and the simulator's, which has no manager.
func NewSettingsStore(ts *tsconfig.Configuration) *queuesettings.Store {
	s := queuesettings.NewStore()
	s.Configure(ts)
	return s
}
