package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/publish"
	"github.com/sealrun/sealrun/verify"
)

func newVerifyPublicationCmd() *cobra.Command {
	var keys, allow []string
	var tsaChain, maxMemory string
	var asJSON, requireSigned bool
	var wf witnessFlags
	var tf tpmFlags
	cmd := &cobra.Command{
		Use:   "verify-publication DIR [--key OPERATOR.pub ...]",
		Short: "Check a publication (sealrun publish) offline in one step, and say what a reader may conclude",
		Long: `Verify-publication checks everything a publication holds: every file against SHA256SUMS (a file
missing, added or edited is named), publication.json against the directory, every attestation with
the trusted keys and each run's files it binds (report, bundle, audit log, track), every track file
against the track id its runs carry, the run ledgers (a run withheld, or not ended, is named; a
forked, truncated or edited ledger is rejected), and that leaderboard.json, .md and .html are
exactly what the attestations give. Each run's trajectory too: the audit log its attestation names
(a run without it is not valid), every body that log hashes, and transcript.json, transcript.html,
trajectory.json, report.html and the Inspect eval logs, each byte for byte what those give; and
VERIFY.md, what publish writes for these files. Then it prints what a reader may conclude, and what
not.

Strict: VALID means every file was checked against something signed, or is exactly what is made
again from it. A file no check covers (a run's witnessed.json without --witness, a ledger's .tsr or
a run's timestamp without --tsa-chain, a file publish never writes) makes the publication not valid,
named with the reason, unless --allow-unchecked names it: then the verdict is "VALID, N file(s)
unchecked" and lists them.

Give the operator's key as you obtained it (--key, repeatable); without --key the publication's own
keys/ are trusted and their key ids printed, to compare with the operator's. With --witness (each
a witness's public key, as you obtained it from the witness, not from the publication) and
--witnesses N, every published ledger must carry a head N of them cosigned, and every run's
witnessed.json must check. With --tsa-chain (the timestamp authority's certificate chain, PEM),
every ledger's .tsr and every run's timestamp (result.sigstore.json) must check. With --tpm (the
host's TPM enrollment, as the operator publishes it) and --ek-ca (the TPM maker's CA, from the
maker; or --allow-unchecked-ek), every run must be signed with the enrolled TPM's key and carry a
quote (result.tpm.json) that checks: over its statement, sealrund's event log replaying to the
quoted PCR, the sealrund measured last being the build the run records (sealrun verify --tpm, run
by run); it prints what that allows a reader to conclude, and what not.

The list of files is signed: SHA256SUMS.dsse.json is SHA256SUMS in a DSSE envelope signed with
the host's key (sealrun publish --sign-key), checked with the trusted keys, so that a mirror cannot
add, drop or swap a file and rewrite the list unseen. A publication without it (one from before
publish signed its list) still verifies, the result saying "manifest unsigned"; one whose
publication.json says its list is signed and lacks the signature does not; and
--require-signed-manifest refuses every unsigned list.

With --json it prints the result as data (schema sealrun-verify/1, docs/VERIFY-JSON.md): each
check with its outcome (passed; failed, with each file and reason; not applicable, and why), the
files allowed to stay unchecked, and the verdict.

Exit status: 0 the publication checks, 1 it does not (every reason listed), 2 usage or I/O error.
Runs on Linux, macOS and Windows.`,
		Example: `  sealrun verify-publication ./ari-v1-2026-11 --key operator.pub
  sealrun verify-publication ./ari-v1-2026-11 --key operator.pub --witness "$(cat witness.vkey)" --tsa-chain tsa-chain.pem
  sealrun verify-publication ./ari-v1-2026-11 --key operator.pub --tpm enrollment.json --ek-ca maker-root.pem
  sealrun verify-publication ./ari-v1-2026-11 --key operator.pub --allow-unchecked 'ledgers/*.tsr'
  sealrun verify-publication ./ari-v1-2026-11 --key operator.pub --json | jq '.checks[] | select(.outcome == "failed")'`,
		Args: exactArgs(1, "the publication directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := wf.verifiers()
			if err != nil {
				return err
			}
			if err := tf.check(); err != nil {
				return err
			}
			o := verify.Options{Keys: keys, Witnesses: ws, Quorum: wf.quorum, TSAChain: tsaChain, AllowUnchecked: allow, RequireSignedManifest: requireSigned, TPM: tf.options()}
			switch maxMemory {
			case "": // the default
			case "0":
				o.MaxMemory = -1
			default:
				if o.MaxMemory, err = policy.ParseBytes(maxMemory); err != nil {
					return usage(fmt.Errorf("--max-memory %q: %v; give a size such as 256MiB, or 0 to keep nothing", maxMemory, err))
				}
			}
			if !asJSON {
				o.Log = cmd.OutOrStdout()
			}
			r, err := verify.Publication(args[0], o)
			if err != nil {
				return verifyError(err)
			}
			return printResult(cmd.OutOrStdout(), r, asJSON, verify.WritePublicationVerdict)
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "the operator's public key (PEM) or a directory of *.pub; repeatable (default: the publication's keys/)")
	cmd.Flags().StringVar(&tsaChain, "tsa-chain", "", "the timestamp authority's certificate chain (PEM): check each ledger's .tsr and each run's timestamp with it")
	cmd.Flags().StringArrayVar(&allow, "allow-unchecked", nil, "a file (or pattern, * for any name: 'runs/*/witnessed.json') that may stay unchecked; repeatable. The verdict lists them")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (schema "+verify.Schema+", docs/VERIFY-JSON.md): every check, its outcome, each problem's file and reason")
	cmd.Flags().StringVar(&maxMemory, "max-memory", "", "the most of the publication's file contents kept in memory between the checks that read them (a size, e.g. 256MiB; 0: none, each check reads from disk again; default 768MiB)")
	cmd.Flags().BoolVar(&requireSigned, "require-signed-manifest", false, "refuse a publication whose SHA256SUMS is not signed ("+publish.ManifestFile+")")
	wf.add(cmd)
	tf.add(cmd)
	return cmd
}
