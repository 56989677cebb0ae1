//go:build !race

package testenv

// RaceEnabled reports whether the test binary was built with -race;
// BuildBinary then builds with -race too.
const RaceEnabled = false
