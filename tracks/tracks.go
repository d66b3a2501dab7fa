// Package tracks embeds the track files of this repository: sealrun demo fills the demo track's
// placeholders with the pins of what it built.
package tracks

import _ "embed"

// Demo is tracks/demo.toml as committed (with placeholders).
//
//go:embed demo.toml
var Demo string

// The demo track's placeholders, each replaced by sealrun demo with what it built.
const (
	PlaceholderExam       = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	PlaceholderValidation = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	PlaceholderKit        = "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
	PlaceholderController = "sealrun.local/demo-controller@sha256:dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"
	PlaceholderPython     = "sealrun.local/python@sha256:eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
	PlaceholderScaffold   = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
)
