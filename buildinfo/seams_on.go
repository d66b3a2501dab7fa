//go:build sealrun_testseams

package buildinfo

// TestSeams: this is a test build (-tags sealrun_testseams); see seams_off.go.
const TestSeams = true
