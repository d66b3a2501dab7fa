package main

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/digest"
	"github.com/sealrun/sealrun/exams"
	"github.com/sealrun/sealrun/internal/fileio"
)

func newExamCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exam",
		Short: "Build, hash, verify, inspect and synthesize hidden exams",
		Long: `The hidden exam never enters a repository or a container; only its SHA-256 is published. A built
exam is a canonical file (exams/FORMAT.md) whose hash anyone can recompute with sha256sum.`,
		Args: exactArgs(0, "a subcommand: build, hash, verify, show, stats or synth"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return usage(errors.New("missing subcommand: build, hash, verify, show, stats or synth"))
		},
	}
	cmd.AddCommand(newExamBuildCmd(), newExamHashCmd(), newExamVerifyCmd(), newExamShowCmd(), newExamStatsCmd(), newExamSynthCmd())
	return cmd
}

// examInput is the flag group naming a questions or documents input file.
type examInput struct {
	questions, documents string
	contextBytes         int
	maxAnswerBytes       int
	maxQuestions         int
}

func (o *examInput) addFlags(cmd *cobra.Command, limits bool) {
	cmd.Flags().StringVar(&o.questions, "questions", "", "questions input (JSONL: id, prefix|prefix_b64, answer|answer_b64); - for stdin")
	cmd.Flags().StringVar(&o.documents, "documents", "", "documents input (JSONL: id, text, answers [[start,end],...]); - for stdin")
	o.contextBytes, o.maxAnswerBytes, o.maxQuestions = exams.DefaultContextBytes, exams.DefaultMaxAnswerBytes, exams.DefaultMaxQuestions
	if limits {
		cmd.Flags().IntVar(&o.contextBytes, "context-bytes", exams.DefaultContextBytes, "bytes of prefix kept per question (the model's context window)")
		cmd.Flags().IntVar(&o.maxAnswerBytes, "max-answer-bytes", exams.DefaultMaxAnswerBytes, "longest answer accepted")
		cmd.Flags().IntVar(&o.maxQuestions, "max-questions", exams.DefaultMaxQuestions, "most questions accepted")
	}
}

func (o *examInput) given() bool { return o.questions != "" || o.documents != "" }

// families maps question ids to the family labels of the input, or is nil when none is given.
func (o *examInput) families(cmd *cobra.Command) (map[string]string, error) {
	if !o.given() {
		return nil, nil
	}
	qs, err := o.read(cmd.InOrStdin())
	if err != nil {
		return nil, inputError(cmd.ErrOrStderr(), err)
	}
	m := make(map[string]string, len(qs))
	for _, q := range qs {
		m[q.ID] = q.Family
	}
	return m, nil
}

// read parses the input file; the caller checked that exactly one is given.
func (o *examInput) read(stdin io.Reader) ([]exams.Question, error) {
	if o.questions != "" && o.documents != "" {
		return nil, usage(errors.New("give either --questions or --documents, not both"))
	}
	if o.contextBytes < 1 || o.contextBytes > exams.MaxContextBytes {
		return nil, usage(fmt.Errorf("--context-bytes %d out of range; expected 1 to %d", o.contextBytes, exams.MaxContextBytes))
	}
	if o.maxAnswerBytes < 1 || o.maxQuestions < 1 {
		return nil, usage(errors.New("--max-answer-bytes and --max-questions must be at least 1"))
	}
	path, read := o.questions, exams.ReadQuestions
	if o.documents != "" {
		path, read = o.documents, exams.ReadDocuments
	}
	var in io.Reader = stdin
	name := "stdin"
	if path != "-" {
		f, err := fileio.OpenRegular(path, "input file")
		if err != nil {
			return nil, err
		}
		defer f.Close()
		in, name = f, path
	}
	return read(name, in, exams.WithContextBytes(o.contextBytes), exams.WithMaxAnswerBytes(o.maxAnswerBytes), exams.WithMaxQuestions(o.maxQuestions))
}

// inputError prints every problem of a bad input file and returns the exit error.
func inputError(w io.Writer, err error) error {
	var ie *exams.InvalidInputError
	if errors.As(err, &ie) {
		fmt.Fprintln(w, ie.Error())
		n := len(ie.Problems) + ie.More
		if n > 1 {
			fmt.Fprintf(w, "%s: %d problems; nothing was written\n", ie.File, n)
		}
		return &exitError{code: exitInvalid, err: err, quiet: true}
	}
	return err
}

func newExamBuildCmd() *cobra.Command {
	var in examInput
	var out string
	cmd := &cobra.Command{
		Use:   "build (--questions Q.jsonl | --documents D.jsonl) --out EXAM",
		Short: "Build the canonical exam file from questions or documents; print its hash",
		Long: `Build validates the input (every problem is reported with its line), masks earlier answers of a
document out of its later prefixes, keeps the last --context-bytes of each prefix, and writes the
canonical exam atomically (mode 0600): a failed build leaves no file. The exam hash it prints is
the file's SHA-256. Formats: exams/FORMAT.md.`,
		Example: `  sealrun exam synth --seed 7 --count 100 --out docs.jsonl
  sealrun exam build --documents docs.jsonl --out exam.sealrun`,
		Args: exactArgs(0, "no arguments (use --questions or --documents, and --out)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !in.given() {
				return usage(errors.New("give the input with --questions or --documents"))
			}
			if out == "" {
				return usage(errors.New("give the output file with --out"))
			}
			qs, err := in.read(cmd.InOrStdin())
			if err != nil {
				return inputError(cmd.ErrOrStderr(), err)
			}
			sum, err := exams.WriteFile(out, qs, in.contextBytes)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d questions, context %d bytes\nsha256 %s\n", out, len(qs), in.contextBytes, sum)
			return nil
		},
	}
	in.addFlags(cmd, true)
	cmd.Flags().StringVar(&out, "out", "", "the built exam file to write (atomically)")
	return cmd
}

func newExamHashCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "hash EXAM",
		Short: "Print the exam hash: the SHA-256 of the file (same as sha256sum)",
		Args:  exactArgs(1, "one exam file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := fileio.OpenRegular(args[0], "exam")
			if err != nil {
				return err
			}
			f.Close()
			sum, err := exams.HashFile(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), sum)
			return nil
		},
	}
}

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

func newExamVerifyCmd() *cobra.Command {
	var want string
	cmd := &cobra.Command{
		Use:   "verify EXAM --sha256 HEX",
		Short: "Check that an exam file is well formed and has the given hash",
		Args:  exactArgs(1, "one exam file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !sha256Hex.MatchString(want) {
				return usage(fmt.Errorf("--sha256 %q is not 64 lowercase hex digits (as sha256sum or a track's [exam].sha256 prints it)", want))
			}
			ex, err := openExam(args[0], digest.Hex(want))
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: ok, %d questions, context %d bytes, sha256 %s\n", args[0], len(ex.Questions), ex.Header.ContextBytes, ex.SHA256)
			return nil
		},
	}
	cmd.Flags().StringVar(&want, "sha256", "", "the expected exam hash (64 lowercase hex)")
	return cmd
}

func openExam(path string, want digest.Hex) (*exams.Exam, error) {
	f, err := fileio.OpenRegular(path, "exam")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return exams.Decode(path, f, digest.Hex(want))
}

func newExamShowCmd() *cobra.Command {
	var id string
	var tailBytes int
	cmd := &cobra.Command{
		Use:   "show EXAM [--id ID]",
		Short: "Print questions readably: id, lengths, prefix tail and answer",
		Long: `Show lists every question on one line (id, prefix and answer lengths, the prefix's last bytes and
the answer), or with --id one question in full. Bytes that are not printable UTF-8 (for example a
character cut by truncation at the start of a prefix) are shown as \xNN.`,
		Args: exactArgs(1, "one exam file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ex, err := openExam(args[0], "")
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if id != "" {
				for _, q := range ex.Questions {
					if q.ID == id {
						fmt.Fprintf(w, "id      %s\nprefix  %d bytes (context %d)\nanswer  %d bytes\n--- prefix\n%s\n--- answer\n%s\n", q.ID, len(q.Prefix), ex.Header.ContextBytes, len(q.Answer), exams.Printable(q.Prefix), exams.Printable(q.Answer))
						return nil
					}
				}
				return fmt.Errorf("no question with id %q in %s; list the ids with: sealrun exam show %s", id, args[0], args[0])
			}
			for _, q := range ex.Questions {
				p := q.Prefix
				if len(p) > tailBytes {
					p = p[len(p)-tailBytes:]
				}
				fmt.Fprintf(w, "%s\tprefix %d B\tanswer %d B\t\"…%s\" -> \"%s\"\n", q.ID, len(q.Prefix), len(q.Answer), oneLine(p), oneLine(q.Answer))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&id, "id", "", "show only this question, in full")
	cmd.Flags().IntVar(&tailBytes, "tail", 48, "prefix bytes shown per question in the list")
	return cmd
}

func newExamStatsCmd() *cobra.Command {
	var in examInput
	cmd := &cobra.Command{
		Use:   "stats EXAM [--documents D.jsonl | --questions Q.jsonl]",
		Short: "Print counts, families and prefix/answer length histograms",
		Long: `Stats summarises a built exam. Families are not stored in a built exam; give the input it was
built from (--documents or --questions, with its "family" keys) to count them.`,
		Args: exactArgs(1, "one exam file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ex, err := openExam(args[0], "")
			if err != nil {
				return err
			}
			families, err := in.families(cmd)
			if err != nil {
				return err
			}
			exams.ComputeStats(ex.Questions, families).Write(cmd.OutOrStdout())
			return nil
		},
	}
	in.addFlags(cmd, false)
	return cmd
}

func newExamSynthCmd() *cobra.Command {
	var seed uint64
	var count int
	var out string
	cmd := &cobra.Command{
		Use:   "synth --seed S --count N --out D.jsonl",
		Short: "Write synthetic documents (input to exam build), deterministic for a seed",
		Long: `Synth writes documents whose answers depend on definitions inside each document (records,
invented vocabulary, schedules, list continuation, numeric sequences, symbolic transforms,
extraction), for demos and tests. The same seed and count always give the same bytes.`,
		Args: exactArgs(0, "no arguments (use --seed, --count, --out)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || count > 10_000_000 {
				return usage(fmt.Errorf("--count %d out of range; expected 1 to 10000000 questions", count))
			}
			if out == "" {
				return usage(errors.New("give the output file with --out (- for stdout)"))
			}
			docs := exams.Synthesize(seed, count)
			if out == "-" {
				return exams.WriteDocuments(cmd.OutOrStdout(), docs)
			}
			if err := fileio.WriteAtomic(out, 0o644, func(w io.Writer) error { return exams.WriteDocuments(w, docs) }); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %d documents, %d questions (seed %d)\n", out, len(docs), count, seed)
			return nil
		},
	}
	cmd.Flags().Uint64Var(&seed, "seed", 1, "generator seed")
	cmd.Flags().IntVar(&count, "count", 0, "number of questions to generate")
	cmd.Flags().StringVar(&out, "out", "", "documents file to write (atomically); - for stdout")
	return cmd
}

// oneLine renders bytes readably on one line: exams.Printable with newlines and tabs escaped.
func oneLine(b []byte) string {
	return strings.NewReplacer("\n", `\n`, "\t", `\t`, `"`, `\"`).Replace(exams.Printable(b))
}
