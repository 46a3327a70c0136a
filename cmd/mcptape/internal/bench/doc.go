// Package bench is `mcptape bench`: it measures mcptape's recording proxy
// against the alternatives a user would compare it with, side by side in
// one run and on loopback only.
//
// # Targets
//
//	direct   the load generator talks to the fixture server itself
//	plain    a stock httputil.ReverseProxy that records nothing (and, on
//	         purpose, lacks mcptape's fix for the request-body race that
//	         cuts streamed responses now and then)
//	nginx    Debian's nginx as a non-buffering reverse proxy
//	mcptape  `mcptape record` into a fresh Badger store
//	replay   `mcptape replay server`, against direct only
//	versus   `mcptape record` from another mcptape binary (Config.Versus),
//	         to compare two builds within one run
//
// Every server and proxy is a child process ([Command]: the mcptape
// binary re-executed, or nginx), so the CPU time and memory of each can be
// read from /proc. The load generator runs in the caller's process and
// reads SSE with protocol's parser, the recorder's own. Targets take turns
// in short batches, round after round, so that drift (thermal, noisy
// neighbours, GC of the load generator) hits all of them alike.
//
// # Use
//
// The CLI fills a [Config] from its flags and calls [Run], which prints a
// markdown report (and, with Config.JSONFile, a [Report] as JSON).
// [Profiler] runs the same load generator against a proxy in the caller's
// process, for CPU and memory profiles.
package bench
