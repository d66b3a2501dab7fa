// Package leaderboard owns rows built from verified attestations: seeds per row, mean ± standard
// error, provisional rows, ties within noise, and invalid runs listed with their reruns.
package leaderboard
