// Package leaderboard builds leaderboards a reader can trust without trusting the publisher:
// every number comes from an attestation that verified with a trusted key, and the rules of
// the methodology (seeds, mean ± SE, provisional rows, ties, failed and invalid runs, reruns,
// track versions) are applied by code, in exact arithmetic until display. FORMAT.md documents
// the rules and the output formats (text, markdown, html, json, csv). It builds for every OS.
package leaderboard
