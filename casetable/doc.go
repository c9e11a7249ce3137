// Package casetable is farm's claim protocol: it hands out the cases of a
// run's tables (their format is tablefmt's) to the run's meta-jobs, each
// case once, with no lock and no server, over a shared filesystem that may
// stall, lie and lose replies. The claim state is a chain of generations
// (chain.go), a run's claims spread over lanes (lanes.go); a run starts,
// farm add queues a table, and farm repair rebuilds the state here
// (run.go, repair.go). CLAIMS.md states the invariants and where each is
// enforced.
package casetable
