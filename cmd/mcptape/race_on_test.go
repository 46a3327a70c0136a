//go:build race

package main

// raceEnabled says the race detector is on: tests that push a million
// messages through a child mcptape take minutes then, and push fewer.
const raceEnabled = true
