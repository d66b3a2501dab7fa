// Package airs reads AIRS-Bench task directories and computes the benchmark's scores.
//
// A task directory (the AIRS-Bench paper, section 4.3 and appendix B) holds metadata.yaml,
// project_description.md, prepare.py, evaluate_prepare.py, evaluate.py and optionally utils.py.
// Open validates one and names every problem as file:line:column: field: what; fix. Fields this
// version does not know are kept and reported, never dropped. TreeHash is the directory hash a
// track pins, the same as a documented shell recipe.
//
// The scores (score.go) are the paper's: the normalized score with the march-of-9s or identity
// transform (Eq. 2, 3, 8), the valid submission rate (Eq. 1), and Elo ratings from a
// Bradley–Terry fit (Eq. 4, 5) with the SOTA as a player, with bootstrap confidence intervals
// drawn from a fixed seed.
package airs
