// Package tracks embeds the track files of this repository: sealrun demo pins the demo track
// (package trackpin) to what it built.
package tracks

import _ "embed"

// Demo is tracks/demo.toml as committed (with placeholders).
//
//go:embed demo.toml
var Demo string
