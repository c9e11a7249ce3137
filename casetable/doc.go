// Package casetable is farm's claim protocol: it hands out the cases of a
// run's tables (their format is tablefmt's) to the run's meta-jobs, each
// case once, with no lock and no server, over a shared filesystem that may
// stall, lie and lose replies. CLAIMS.md says how, the invariants and where
// each is enforced; ARCHITECTURE.md what each file holds.
package casetable
