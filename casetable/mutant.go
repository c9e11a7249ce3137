package casetable

// mutant names a past defect of the claim core that the simulator's tests
// reintroduce, to show that they catch it (SIMULATION.md, the catalogue;
// make sim-mutants): "" in every run but theirs, where it is set before
// any Store is made and reset after.
var mutant string

// mutated reports whether the past defect name is reintroduced.
func mutated(name string) bool { return mutant != "" && mutant == name }
