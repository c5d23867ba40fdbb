//go:build !race

package simulator

// raceDetector: this test binary runs under the race detector.
const raceDetector = false
