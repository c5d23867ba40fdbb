package policy

// registry lists every feature of the victim policy, in precedence order: when several apply to
// one candidate, the one listed first decides. It is the one place a feature's unit is added or
// taken out; its gate is in package features, its part in the preemptor in preemption.Plugins.
func registry() Table {
	return Table{
		// Refuses a same-priority candidate when another pending workload has the turn, before
		// expected-runtime could make it eligible; else makes it eligible past minAdmitDuration.
		timeBasedUnit(),
		// Makes a candidate past its expected runtime eligible.
		expectedRuntimeUnit(),
		// Vetoes an eligible candidate inside its min-runtime.
		minRuntimeUnit(),
		// Vetoes an eligible candidate whose priority class tolerates the preemptor.
		tolerationUnit(),
		// Vetoes a candidate whose room is promised to another preemptor by a notice.
		noticeUnit(),
		// Vetoes a candidate whose preemption would overdraw a preemption budget on its path.
		budgetUnit(),
	}
}
