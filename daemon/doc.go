// Package daemon is sealrund: the run lifecycle (queue, state machine, journal, crash recovery),
// the admin API (API.md) and the Executor that composes the sandbox, the model gateway, the
// runner and the grader into one sealed run ending in a signed attestation. It composes its
// siblings, as do only the programs that run or drive it (cmd/sealrund, cmd/sealrun, the demo)
// and the end-to-end tests.
//
// Design decisions of this package, and why (ARCHITECTURE.md, "Decisions and why"):
//   - the journal is append-only fsynced JSON Lines, not bbolt: it is only appended to and
//     replayed whole at start, and an operator can read it with jq;
//   - pinned files (the hidden exam) live in a content store by SHA-256
//     (<state>/content/sha256/<hex>) and kits by their kit hash (<state>/kits/<hash>), both added
//     with `sealrun content add`, so preparing verifies each by hash;
//   - the provider "none" is built in: a run of a scripted scaffold (the demo agent) has a
//     gateway that refuses every request, since there is no model to reach;
//   - "egress_blocked" of a run's containers is the network hook's check of the namespace before
//     the container ran (the probe's active connection attempts are for sealrun sandbox probe);
//   - a run whose scaffold exits before the deadline ends then (the agent is gone);
//   - tests replace the scaffold's command and add files to the workspace after the kit
//     (Executor.Entrypoint and TestOverlay; sealrund's SEALRUND_TEST_ENTRYPOINT and
//     SEALRUND_TEST_OVERLAY): the tests' scripted agents change between runs of one track, which
//     a pinned kit cannot. Two failpoints serve the fault tests: SEALRUND_TEST_HOLD (a run stops
//     at "preparing" or "sign") and SEALRUND_TEST_KILL_AFTER ("KIND[:STATE][#N]": the daemon
//     sends itself SIGKILL right after the N-th matching journal event is fsynced, recovery
//     events at start included). All four exist only in a test build (-tags sealrun_testseams,
//     TestSeams, set by make test): a release build refuses them, and every attestation records
//     the build and the seams its run used (predicate.build);
//   - the run ledger (ledger_linux.go, package ledger): each run is appended
//     when queued and when it ended, and its attestation carries its entry, head and inclusion
//     proof; a failed write to the journal or the ledger stops the daemon taking runs (Broken);
//   - AIRS-Bench tasks are a second kind of track (task_linux.go): a track with [task] runs
//     the task's preparation scripts before the clock starts, seeds the workspace with the
//     task's description, evaluate.py and the prepared data, and is attested under a second
//     predicate type (sealed-task-run/v1) so that no exam-only verifier misreads its metric; the
//     grader image is the task's evaluation image, and the preparation scripts get the grading
//     limit.
package daemon
