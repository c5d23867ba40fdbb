package policy

import (
	"testing"
)

// testUnits are the units of this package in the registry's order (plugins.Units; the whole table,
// with the features of their own packages, is tested in package plugins).
func testUnits() Table {
	return Table{TimeBasedUnit()}
}

// mustUnit is feature f's unit.
func mustUnit(t *testing.T, f Feature) Unit {
	t.Helper()
	for _, u := range testUnits() {
		if u.Feature == f {
			return u
		}
	}
	t.Fatalf("no unit for feature %s in the registry", f)
	return Unit{}
}
