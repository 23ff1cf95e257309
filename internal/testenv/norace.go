//go:build !race

package testenv

// RaceEnabled says whether this binary was built with -race: tests that
// build a binary build it the same way, and timing-sensitive loads pace
// themselves by it.
const RaceEnabled = false
