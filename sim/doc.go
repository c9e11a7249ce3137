// Package sim is a deterministic simulation of the world that farm's claim
// protocol runs in (FoundationDB's simulation and TigerBeetle's VOPR, after
// /work/shared/STYLE.md, "A protocol you can trust"): processes run real
// code against simulated filesystems (vfs.FS), one at a time, chosen by a
// seeded scheduler, on a virtual clock, with faults drawn from the seed.
//
// A World holds one in-memory file server, shared by its processes, and a
// Model of the filesystem: how its clients cache, what faults it gives and
// how long its calls take. Each process (World.Go) is a goroutine with a
// client of its own (Proc.FS): its descriptors, its caches, its unflushed
// writes. World.Run schedules them. A process runs alone until its next
// call of its FS — every call, and Sleep, is a scheduling point — and
// waits there until the scheduler picks it again. The scheduler picks, with
// the world's PRNG, among the processes that can run; a call advances the
// virtual clock by its latency, and when no process can run the clock
// jumps to the earliest wake-up. Given the seed, the model, the options and
// the processes' code, a run is the same every time, and so is its trace
// (World.Trace): a failing seed replays exactly.
//
// What the code under test must do for that: make every filesystem call,
// read every time and draw every random number through its vfs.FS; start
// no goroutine that uses it; block on nothing but its FS (no channel or
// lock that another process releases: the scheduler would wait for ever);
// and never recover a panic. A crash is a panic that unwinds the process:
// its deferred functions run, and every FS call they make panics again at
// once, without effect, as the calls of a killed process never reach the
// server.
//
// The test's own view is World.Root: the server's state, with no cache, no
// fault and no scheduling, for setting files up before Run, checking
// invariants in the OnStep and OnCrash hooks (called while no process
// runs) and reading the outcome after.
package sim
