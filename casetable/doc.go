// Package casetable is farm's claim protocol: it hands out the cases of a
// run's tables (their format is tablefmt's) to the run's meta-jobs, each
// case once, with no lock and no server, over a shared filesystem that may
// stall, lie and lose replies. The claim state is chains of generations
// (chain.go, store.go, record.go): the main chain holds the run record,
// which names the run's sets of lanes, and a claim commits on one lane
// (claim.go, lanes.go, table.go); a run starts, farm add adds a set, and
// farm repair rebuilds the state here (run.go, repair.go). CLAIMS.md
// states the invariants and where each is enforced.
package casetable
