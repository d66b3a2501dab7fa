package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sealrun/sealrun/leaderboard"
	"github.com/spf13/cobra"
)

func newVerifyPublicationCmd() *cobra.Command {
	var keys []string
	cmd := &cobra.Command{
		Use:   "verify-publication DIR [--key OPERATOR.pub ...]",
		Short: "Check a publication (sealrun publish) offline in one step, and say what a reader may conclude",
		Long: `Verify-publication checks everything a publication holds: every file against SHA256SUMS (a file
missing, added or edited is named), publication.json against the directory, every attestation with
the trusted keys and each run's files it binds (report, bundle, audit log, track), every track file
against the track id its runs carry, the run ledgers (a run withheld, or not ended, is named; a
forked, truncated or edited ledger is rejected), and that leaderboard.json, .md and .html are
exactly what the attestations give. Then it prints what a reader may conclude, and what not.

Give the operator's key as you obtained it (--key, repeatable); without --key the publication's own
keys/ are trusted and their key ids printed, to compare with the operator's.

Exit status: 0 the publication checks, 1 it does not (every reason listed), 2 usage or I/O error.
Runs on Linux, macOS and Windows.`,
		Example: `  sealrun verify-publication ./ari-v1-2026-11 --key operator.pub`,
		Args:    exactArgs(1, "the publication directory"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return verifyPublication(cmd, args[0], keys)
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "the operator's public key (PEM) or a directory of *.pub; repeatable (default: the publication's keys/)")
	return cmd
}

func verifyPublication(cmd *cobra.Command, dir string, keyPaths []string) error {
	w := cmd.OutOrStdout()
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return ioError(fmt.Errorf("publication %s: not a directory (%v)", dir, err))
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// 1. The files: exactly those SHA256SUMS lists, each with its sum.
	sums, err := readSums(filepath.Join(dir, publicationSums))
	if err != nil {
		return &exitError{code: exitInvalid, err: fmt.Errorf("publication %s: %w; it is not a publication sealrun publish wrote, or its list was damaged", dir, err)}
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() || rel == publicationSums:
		case !d.Type().IsRegular():
			bad("%s: not a regular file (%s); a publication holds only files", rel, d.Type())
		default:
			want, ok := sums[rel]
			if !ok {
				bad("%s: added: not in SHA256SUMS", rel)
				return nil
			}
			seen[rel] = true
			got, err := sha256File(p)
			if err != nil {
				return err
			}
			if got != want {
				bad("%s: edited: sha256 %s, SHA256SUMS says %s", rel, got, want)
			}
		}
		return nil
	})
	if err != nil {
		return ioError(err)
	}
	var missing []string
	for p := range sums {
		if !seen[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(missing)
	for _, p := range missing {
		bad("%s: removed: SHA256SUMS lists it", p)
	}
	fmt.Fprintf(w, "files: %d listed in SHA256SUMS, %d present and equal\n", len(sums), len(seen)-countEdited(problems))

	// 2. publication.json against the directory.
	var meta publication
	mb, err := os.ReadFile(filepath.Join(dir, publicationMeta))
	if err == nil {
		d := json.NewDecoder(bytes.NewReader(mb))
		d.DisallowUnknownFields()
		err = d.Decode(&meta)
	}
	if err != nil || meta.Format != publicationFormat {
		bad("%s: unreadable or not %s (%v)", publicationMeta, publicationFormat, err)
		return publicationVerdict(w, problems)
	}
	runDirs, _ := filepath.Glob(filepath.Join(dir, "runs", "*"))
	var onDisk []string
	for _, r := range runDirs {
		onDisk = append(onDisk, filepath.Base(r))
	}
	sort.Strings(onDisk)
	if strings.Join(onDisk, ",") != strings.Join(meta.Runs, ",") {
		bad("runs/: holds %s; %s lists %s", listOrNone(onDisk), publicationMeta, listOrNone(meta.Runs))
	}

	// 3. Keys.
	if len(keyPaths) == 0 {
		keyPaths = []string{filepath.Join(dir, "keys")}
		fmt.Fprintf(w, "keys: no --key given, so the publication's own keys/ are trusted; compare these key ids with the operator's:\n")
	} else {
		fmt.Fprintf(w, "keys: trusted as given:\n")
	}
	ks, err := leaderboard.LoadKeys(keyPaths)
	if err != nil {
		return ioError(err)
	}
	for _, k := range ks {
		fmt.Fprintf(w, "  %s  key id %s\n", k.Name, k.KeyID)
	}

	// 4. Every run: its attestation verifies, names this run, and binds its files.
	for _, id := range onDisk {
		d := filepath.Join(dir, "runs", id)
		att := filepath.Join(d, "result.att.json")
		if _, err := os.Stat(att); err != nil {
			bad("runs/%s: no result.att.json", id)
			continue
		}
		var verified bool
		var lastErr error
		for _, kp := range keyFiles(keyPaths) {
			f := &verifyFlags{key: kp}
			for _, o := range []struct {
				file string
				dst  *string
			}{{"report.json", &f.report}, {"bundle.tar.gz", &f.bundle}, {"audit.jsonl", &f.audit}, {"track.toml", &f.track}} {
				if _, err := os.Stat(filepath.Join(d, o.file)); err == nil {
					*o.dst = filepath.Join(d, o.file)
				}
			}
			v, err := verifyAttestation(att, f)
			if err != nil {
				lastErr = err
				continue
			}
			if v.Statement.Predicate.Run.ID != id {
				bad("runs/%s: its attestation is of run %s", id, v.Statement.Predicate.Run.ID)
			}
			verified = true
			break
		}
		if !verified {
			bad("runs/%s: the attestation or a file it binds does not verify with a trusted key: %v", id, lastErr)
		}
	}

	// 5. The boards, rebuilt from the publication's own files, and the ledgers' accounting.
	boards, acct, err := publicationBoardsWith(dir, meta, keyPaths)
	if err != nil {
		bad("leaderboard: cannot be rebuilt: %v", err)
		return publicationVerdict(w, problems)
	}
	for _, a := range acct {
		bad("%s", a)
	}
	names := make([]string, 0, len(boards))
	for n := range boards {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		have, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			bad("%s: missing (%v)", n, errors.Unwrap(err))
			continue
		}
		if !bytes.Equal(have, boards[n]) {
			bad("%s: not what the attestations give (rebuild it with the command in VERIFY.md and compare)", n)
		}
	}

	// 6. What a reader may conclude.
	if len(problems) == 0 {
		summarisePublication(w, dir, boards["leaderboard.json"], meta)
	}
	return publicationVerdict(w, problems)
}

// keyFiles lists the key files of --key paths (files, or directories of *.pub / *.pem).
func keyFiles(paths []string) []string {
	var out []string
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			a, _ := filepath.Glob(filepath.Join(p, "*.pub"))
			b, _ := filepath.Glob(filepath.Join(p, "*.pem"))
			out = append(out, append(a, b...)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func countEdited(problems []string) int {
	n := 0
	for _, p := range problems {
		if strings.Contains(p, ": edited: ") {
			n++
		}
	}
	return n
}

func listOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

// publicationBoardsWith rebuilds the boards with the reader's keys; the published boards were
// built with the publication's keys, whose names the board carries, so the reader's keys must
// be the same files by name for the bytes to agree: they are loaded from keys/ when they verify
// the same (key ids equal), else from the reader's files.
func publicationBoardsWith(dir string, meta publication, keyPaths []string) (map[string][]byte, []string, error) {
	own, err := leaderboard.LoadKeys([]string{filepath.Join(dir, "keys")})
	if err != nil {
		return nil, nil, err
	}
	given, err := leaderboard.LoadKeys(absPaths(keyPaths))
	if err != nil {
		return nil, nil, err
	}
	trusted := map[string]bool{}
	for _, k := range given {
		trusted[k.KeyID] = true
	}
	for _, k := range own {
		if !trusted[k.KeyID] {
			return nil, []string{fmt.Sprintf("keys/%s (key id %s) is not among the trusted keys; a run it signed would count on the published board", k.Name, k.KeyID)}, nil
		}
	}
	return publicationBoards(dir, meta)
}

func absPaths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		if a, err := filepath.Abs(p); err == nil {
			out[i] = a
		} else {
			out[i] = p
		}
	}
	return out
}

// summarisePublication prints the boards' rows and what they mean.
func summarisePublication(w interface{ Write([]byte) (int, error) }, dir string, boardJSON []byte, meta publication) {
	fmt.Fprintf(w, "runs: %d, every attestation verified with a trusted key, with the files it binds\n", len(meta.Runs))
	if meta.Suite == "exam" {
		var b leaderboard.Board
		if json.Unmarshal(boardJSON, &b) == nil {
			for _, t := range b.Tables {
				fmt.Fprintf(w, "track %s %s (%s, id %s): %d row(s)\n", t.Track.Name, t.Track.Version, t.Track.Status, t.Track.ID, len(t.Rows))
				for _, r := range t.Rows {
					kind := "official"
					if r.Provisional {
						kind = fmt.Sprintf("provisional: %d of %d seeds%s", r.N, r.Required, missingSeeds(r))
					}
					fmt.Fprintf(w, "  %s  %s ± %s  (%d valid seeds, %d failed, %d invalid; %s)\n", r.Agent.Name(), pctOrDash(r.MeanPct), pctOrDash(r.SEPct), r.N, r.Failed, len(r.Invalid), kind)
				}
			}
		}
	}
	if len(meta.Ledgers) > 0 {
		fmt.Fprintf(w, "ledgers: %s: every run they hold of these tracks ended and is published here, and every run here is in them\n", strings.Join(meta.Ledgers, ", "))
	} else {
		fmt.Fprintf(w, "ledgers: none published, so a run the operator withheld cannot be detected; the seeds each row needs are counted above\n")
	}
	fmt.Fprintf(w, `A reader may conclude: each run listed ran under the track file of its id, sealed as the track
pins it, and scored what its signed attestation says; the leaderboard files are exactly what those
attestations give. Not: that the signing host was honest (a signature says which key signed, not
what the hardware did) or that the model was the one named beyond what the gateway recorded.
`)
}

func missingSeeds(r leaderboard.Row) string {
	have := map[int64]bool{}
	for _, run := range r.Runs {
		have[run.Seed] = true
	}
	var miss []string
	for s := int64(1); s <= r.Required; s++ {
		if !have[s] {
			miss = append(miss, fmt.Sprint(s))
		}
	}
	if len(miss) == 0 {
		return ""
	}
	return "; seeds missing: " + strings.Join(miss, ", ")
}

func publicationVerdict(w interface{ Write([]byte) (int, error) }, problems []string) error {
	if len(problems) == 0 {
		fmt.Fprintln(w, "publication: VALID")
		return nil
	}
	fmt.Fprintf(w, "publication: NOT VALID (%d problem(s)):\n", len(problems))
	for _, p := range problems {
		fmt.Fprintf(w, "  %s\n", p)
	}
	return &exitError{code: exitInvalid, err: fmt.Errorf("the publication does not check: %d problem(s), listed", len(problems)), quiet: true}
}

func pctOrDash(v *float64) string {
	if v == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f", *v)
}
