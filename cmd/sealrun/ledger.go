package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/leaderboard"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/verify"
)

func newLedgerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger export|verify|vkey",
		Short: "Publish and check a host's run ledger: every run it accepted and how each ended",
		Long: `Every run sealrund accepts is appended to the host's run ledger when it is queued and again when it
ends (graded, failed or invalid, with the SHA-256 of its signed attestation). The ledger is a
transparency log as RFC 9162 and Sigstore's Rekor keep theirs: a Merkle tree whose heads are signed
checkpoints (C2SP tlog-checkpoint, as a signed note) with the host's attestation key. Each
attestation carries its run's entry, the head it was included under and the inclusion proof.

  export   write the ledger for publication (entries and the latest signed head)
  verify   check a published ledger with the host's key, and heads seen before against it
  vkey     print the ledger's note verifier key, which witnesses are configured with

sealrun leaderboard --ledger L accounts for every run of each row against the ledgers.
ledger/FORMAT.md documents the file.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usage(errors.New("missing subcommand: export, verify or vkey"))
			}
			return usage(fmt.Errorf("unknown subcommand %q: export, verify or vkey", args[0]))
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(newLedgerExportCmd(g), newLedgerVerifyCmd(), newLedgerVkeyCmd())
	return cmd
}

func newLedgerExportCmd(g *globals) *cobra.Command {
	var out, tsaURL, tsaChain string
	var witnessed int
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "export --out FILE [--witnessed N [--wait D] [--tsa URL --tsa-chain PEM]]",
		Short: "Write this host's run ledger for publication",
		Long: `Export reads the ledger sealrund keeps in its state directory (--state-dir, ledger.jsonl), checks
that every signed head agrees with the entries before it, and writes every entry under the latest
head and that head to --out, atomically. Publish it beside the attestations.

With --witnessed N it also writes the largest head that N witnesses cosigned (sealrund sends every
head to its [[witnesses]] and keeps their cosignatures in ledger-cosignatures.jsonl), in its place
among the entries, with their cosignature lines: what a reader's sealrun ledger verify --witness
checks. It waits up to --wait for a head over every entry to have them, saying every few seconds
which witnesses have cosigned what, then takes the largest witnessed head there is; none at all
is an error naming each witness's last cosigned size. With --tsa URL and --tsa-chain PEM (an RFC
3161 timestamp authority, as sealrun.toml's [timestamp] names one) it also has the witnessed
head, exactly as the export carries it, timestamped, and writes the authority's answer beside the
export (FILE.tsr): sealrun ledger verify --tsa-chain checks that the head existed by then.

Exit status: 0 written, 1 the ledger does not check or no head has N cosignatures, 2 usage or
I/O error.`,
		Example: `  sealrun ledger export --out /shared/results/ledger-$(hostname).jsonl
  sealrun ledger export --out ledger.jsonl --witnessed 2 --wait 2m`,
		Args: exactArgs(0, "no arguments (the ledger is the state directory's)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usage(errors.New("give the file to write with --out"))
			}
			if witnessed < 0 || wait < 0 {
				return usage(errors.New("--witnessed and --wait take a count and a duration of 0 or more"))
			}
			if (tsaURL == "") != (tsaChain == "") || tsaURL != "" && witnessed == 0 {
				return usage(errors.New("--tsa and --tsa-chain go together, with --witnessed: the witnessed head is what is timestamped"))
			}
			src := filepath.Join(g.stateDir, "ledger.jsonl")
			f, err := os.Open(src)
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return ioError(fmt.Errorf("no run ledger at %s: sealrund makes it at its first start (is --state-dir the daemon's state_dir?)", src))
				}
				return ioError(err)
			}
			defer f.Close()
			signed := ""
			if witnessed > 0 {
				if signed, err = waitWitnessed(cmd, f, filepath.Join(g.stateDir, witness.CosignaturesFile), witnessed, wait); err != nil {
					return err
				}
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					return ioError(err)
				}
			}
			var c ledger.Checkpoint
			err = fileio.WriteAtomic(out, 0o644, func(w io.Writer) error {
				var err error
				c, err = ledger.ExportWitnessed(f, w, signed)
				return err
			})
			if err != nil {
				return &exitError{code: exitInvalid, err: fmt.Errorf("ledger %s: %w", src, err)}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d entries of %s, head root %s\n", out, c.Size, c.Origin, hex.EncodeToString(c.Root[:]))
			if tsaURL != "" {
				at, name, err := timestampHead(cmd.Context(), tsaURL, tsaChain, signed, out+verify.HeadTimestampSuffix)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: the witnessed head existed before %s (%s, RFC 3161)\n", out+verify.HeadTimestampSuffix, at.UTC().Format(time.RFC3339), name)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file to write (atomically)")
	cmd.Flags().IntVar(&witnessed, "witnessed", 0, "also write the largest head this many witnesses cosigned")
	cmd.Flags().DurationVar(&wait, "wait", 0, "how long to wait for the witnesses to cosign the latest head")
	cmd.Flags().StringVar(&tsaURL, "tsa", "", "an RFC 3161 timestamp authority's URL: timestamp the witnessed head (written to FILE.tsr)")
	cmd.Flags().StringVar(&tsaChain, "tsa-chain", "", "that authority's certificate chain (PEM), to check its answer")
	return cmd
}

// waitWitnessed waits (up to wait) until a head over every entry of the ledger f has n
// cosignatures in the cosignatures file, and returns the largest head with n there is then.
func waitWitnessed(cmd *cobra.Command, f *os.File, path string, n int, wait time.Duration) (string, error) {
	deadline := time.Now().Add(wait)
	lastSaid := time.Time{}
	for {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", ioError(err)
		}
		head, err := ledger.Export(f, io.Discard)
		if err != nil {
			return "", &exitError{code: exitInvalid, err: fmt.Errorf("ledger %s: %w", f.Name(), err)}
		}
		cs, err := witness.ReadCosignatures(path)
		if err != nil {
			return "", ioError(err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return "", ioError(err)
		}
		ofThisLedger, err := ledger.HeadOf(f)
		if err != nil {
			return "", &exitError{code: exitInvalid, err: fmt.Errorf("ledger %s: %w", f.Name(), err)}
		}
		seen := cs.Witnesses()
		names := slices.Sorted(maps.Keys(seen))
		signed, size, by, ok := cs.Best(names, n, ofThisLedger)
		if ok && size == head.Size || time.Now().After(deadline) {
			var state []string
			for _, w := range names {
				state = append(state, fmt.Sprintf("%s at %d", w, seen[w]))
			}
			if !ok {
				if len(state) == 0 {
					state = []string{"no witness has cosigned any head (is [[witnesses]] set in sealrun.toml, and sealrund running?)"}
				}
				return "", invalid(fmt.Errorf("no head of %d entries or fewer has %d cosignatures: %s", head.Size, n, strings.Join(state, "; ")))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "witnessed head: %d of %d entries, cosigned by %s (each witness's latest: %s)\n", size, head.Size, strings.Join(by, ", "), strings.Join(state, "; "))
			return signed, nil
		}
		if time.Since(lastSaid) >= 5*time.Second {
			fmt.Fprintf(cmd.ErrOrStderr(), "waiting for %d witnesses to cosign the head of %d entries (%d witnessed so far; %s left)\n", n, head.Size, size, time.Until(deadline).Round(time.Second))
			lastSaid = time.Now()
		}
		time.Sleep(time.Second)
	}
}

func newLedgerVerifyCmd() *cobra.Command {
	var keys, heads []string
	var asJSON bool
	var wf witnessFlags
	var tsaChain, tsr string
	cmd := &cobra.Command{
		Use:   "verify LEDGER --key PUB.pem [--head FILE ...] [--json]",
		Short: "Check a published run ledger: signatures, the Merkle tree, heads seen before",
		Long: `Verify reads a published ledger (sealrun ledger export): every line well formed, every entry valid,
each run queued once before it ends once, every head's root that of the entries before it, and the
last head, over all entries, signed by a trusted key. Each --head (a signed checkpoint saved
earlier, from an attestation's ledger.checkpoint or an earlier export's last line) must be
consistent with it: a ledger that was truncated, forked or had an entry edited since fails.

With --witness (each a witness's public key, repeatable) and --witnesses N, a head of the ledger
must also carry N valid cosignatures of those witnesses (sealrun ledger export --witnessed puts
it there): the ledger is then the one the witnesses were shown, not one kept for readers beside
another. It names the witnesses that cosigned and those that did not, and how many entries came
after the witnessed head.

With --tsa-chain PEM it checks the RFC 3161 timestamp beside the ledger (LEDGER.tsr, or
--timestamp FILE) with that authority's chain: over one of the ledger's heads, exactly as it is
written there, by that authority for time-stamping. It prints the time that head existed by.

Exit status: 0 valid, 1 not valid (the reason is printed), 2 usage or I/O error.`,
		Example: `  sealrun ledger verify ledger-node07.jsonl --key sealrun.pub
  sealrun ledger verify ledger-node07.jsonl --key sealrun.pub --head yesterday.checkpoint
  sealrun ledger verify ledger-node07.jsonl --key sealrun.pub --witness "$W1" --witness "$W2" --witnesses 2`,
		Args: exactArgs(1, "one ledger file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws, err := wf.verifiers()
			if err != nil {
				return err
			}
			r, err := verify.Ledger(args[0], verify.LedgerOptions{Keys: keys, Heads: heads, Witnesses: ws, Quorum: wf.quorum, TSAChain: tsaChain, Timestamp: tsr})
			if err != nil {
				return verifyError(err)
			}
			return printResult(cmd.OutOrStdout(), r, asJSON, verify.WriteLedger)
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "the host's public key (PEM), or a directory of *.pub/*.pem")
	cmd.Flags().StringArrayVar(&heads, "head", nil, "a signed head seen before, to check the ledger against (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON (schema "+verify.Schema+", docs/VERIFY-JSON.md): every check, its outcome, each problem's file and reason")
	cmd.Flags().StringVar(&tsaChain, "tsa-chain", "", "check the RFC 3161 timestamp of a head (LEDGER.tsr) with this authority's certificate chain (PEM)")
	cmd.Flags().StringVar(&tsr, "timestamp", "", "the timestamp file (default: LEDGER.tsr)")
	wf.add(cmd)
	return cmd
}

// witnessFlags are --witness and --witnesses, as every verb that checks a ledger takes them.
type witnessFlags struct {
	keys   []string
	quorum int
}

func (f *witnessFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.keys, "witness", nil, "a witness's public key (name+id+base64; repeatable)")
	cmd.Flags().IntVar(&f.quorum, "witnesses", 0, "how many of the --witness keys must have cosigned a head of each ledger (default: all given)")
}

// verifiers parses the keys (nil when none is given).
func (f *witnessFlags) verifiers() ([]*witness.Verifier, error) {
	if len(f.keys) == 0 {
		if f.quorum != 0 {
			return nil, usage(errors.New("--witnesses needs the witnesses' public keys: give each with --witness"))
		}
		return nil, nil
	}
	var out []*witness.Verifier
	for _, k := range f.keys {
		v, err := witness.NewVerifier(k)
		if err != nil {
			return nil, usage(fmt.Errorf("--witness: %w", err))
		}
		out = append(out, v)
	}
	if f.quorum == 0 {
		f.quorum = len(out)
	}
	if f.quorum < 1 || f.quorum > len(out) {
		return nil, usage(fmt.Errorf("--witnesses %d with %d --witness keys: give 1 to %d", f.quorum, len(out), len(out)))
	}
	return out, nil
}

func newLedgerVkeyCmd() *cobra.Command {
	var keys []string
	cmd := &cobra.Command{
		Use:   "vkey LEDGER --key PUB.pem",
		Short: "Print a ledger's note verifier key: what a witness follows it by",
		Long: `Vkey checks a published ledger (sealrun ledger export) with the host's public key and prints the
note verifier key of its heads ("origin+id+base64 key"): the line a witness operator gives sealrun
witness serve --log (or litewitness, or any C2SP witness) to follow this host.

Standard witnesses verify Ed25519 log keys only. A host whose attestation key is ECDSA P-256 gets a
key only sealrun's witness follows (algorithm 0x02), and a warning: to be witnessed by others, make
its key with sealrun keys generate --algo ed25519.

Exit status: 0 printed, 1 the ledger does not check, 2 usage or I/O error.`,
		Example: `  sealrun ledger vkey ledger-node07.jsonl --key sealrun.pub`,
		Args:    exactArgs(1, "one ledger file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(keys) == 0 {
				return usage(errors.New("give the host's public key with --key (a PEM file or a directory of *.pub files)"))
			}
			ks, err := leaderboard.LoadKeys(keys)
			if err != nil {
				return ioError(err)
			}
			f, err := os.Open(args[0])
			if err != nil {
				return ioError(err)
			}
			defer f.Close()
			for _, k := range ks {
				if _, err := f.Seek(0, io.SeekStart); err != nil {
					return ioError(err)
				}
				l, err := ledger.Read(io.LimitReader(f, leaderboard.MaxLedgerBytes), args[0], []signature.Verifier{k.Verifier})
				if err != nil {
					continue
				}
				pub, err := k.Verifier.PublicKey()
				if err != nil {
					return ioError(err)
				}
				vkey, err := ledger.VerifierKey(l.Origin, pub)
				if err != nil {
					return invalid(err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), vkey)
				if _, ok := pub.(ed25519.PublicKey); !ok {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s's key is not Ed25519: only sealrun's witness follows it; standard C2SP witnesses (litewitness, ...) take Ed25519 log keys only (sealrun keys generate --algo ed25519)\n", l.Origin)
				}
				return nil
			}
			return invalid(fmt.Errorf("%s: no --key verifies this ledger's heads (sealrun ledger verify says why)", args[0]))
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "the host's public key (PEM), or a directory of *.pub/*.pem")
	return cmd
}
