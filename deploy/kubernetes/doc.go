// Package kubernetes owns sealrun's Kubernetes design (README.md, sealrund.yaml,
// seeds-job.yaml): manifests that no cluster has run yet. It has no code; its test holds the
// manifests to the Kubernetes API types, to sealrund's configuration and to the Slurm job
// script the seeds' pods run.
package kubernetes
