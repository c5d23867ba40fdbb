// Package v1alpha1 holds kueue-timeshare's own manager settings: the `timeshare` section of the
// manager's configuration file, beside Kueue's Configuration fields.
package v1alpha1
