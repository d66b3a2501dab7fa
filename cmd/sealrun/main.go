// Command sealrun is the operator's CLI: tracks, exams, images, runs, verification.
//
// Exit codes: 0 success, 1 invalid input or a negative verdict, 2 usage error.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/internal/opt"
	"github.com/spf13/cobra"
)

func main() {
	runHookIfRequested() // on Linux, sealrun is also the network hook of the containers it starts
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes.
const (
	exitOK      = 0
	exitInvalid = 1 // bad input, failed check, negative verdict
	exitUsage   = 2 // wrong flags or arguments
)

// exitError carries the exit code chosen by a verb. Errors without one that reach run came from
// argument or flag parsing, so they are usage errors.
type exitError struct {
	code int
	err  error
	// quiet: the verb already printed everything the user needs (for example a list of problems).
	quiet bool
	// noHint: not a mistake in the command line, so no "Run --help" hint (I/O errors with code 2).
	noHint bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// invalid marks err as bad input (exit 1).
func invalid(err error) error { return &exitError{code: exitInvalid, err: err} }

// usage marks err as a usage error (exit 2).
func usage(err error) error { return &exitError{code: exitUsage, err: err} }

// ioError marks err as an input/output failure that prevented a verdict (exit 2, as verify
// documents: 1 is reserved for "not valid").
func ioError(err error) error { return &exitError{code: exitUsage, err: err, noHint: true} }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if !errors.As(err, &ee) {
		ee = &exitError{code: exitUsage, err: err}
	}
	if !ee.quiet {
		fmt.Fprintf(stderr, "%s: %s\n", cmd.CommandPath(), errorText(cmd, ee.err))
	}
	if ee.code == exitUsage && !ee.quiet && !ee.noHint {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return ee.code
}

// errorText is err as cmd says it: each library option and each field of a request sealrund
// refused named as the flag of cmd it came from.
func errorText(cmd *cobra.Command, err error) string {
	name := flagName(cmd)
	msg := opt.Render(err, name)
	var ae *api.Error
	if errors.As(err, &ae) && ae.Option != "" {
		msg = strings.Replace(msg, ae.Option+": ", name(ae.Option)+": ", 1)
		if len(ae.Needs) > 0 {
			words := opt.NeedsText(ae.Needs, func(o string) string { return o })
			if strings.HasSuffix(msg, words) {
				msg = strings.TrimSuffix(msg, words) + opt.NeedsText(ae.Needs, name)
			}
		}
	}
	return msg
}

// flagName names a library's option as cmd's flag it came from: TSAChain is --tsa-chain, Keys
// --key and Witnesses --witness where cmd has that flag (a list's flag is singular: it is
// given once per item), an option in optionFlags its flag, and "tsa chain" where cmd has none
// (an argument, or a value of its own).
func flagName(cmd *cobra.Command) func(option string) string {
	return func(option string) string {
		k := opt.Kebab(option)
		if f, ok := optionFlags[option]; ok {
			k = f
		}
		for _, f := range []string{k, strings.TrimSuffix(k, "s"), strings.TrimSuffix(k, "es")} {
			if f != "" && cmd.Flags().Lookup(f) != nil {
				return "--" + f
			}
		}
		return strings.ReplaceAll(k, "-", " ")
	}
}

// optionFlags are the options whose flag is not their name's: publish.Options.Signer is made
// from --sign-key, a quorum of witnesses is --witnesses (and the witnesses' keys --witness), ...
var optionFlags = map[string]string{"Signer": "sign-key", "Quorum": "witnesses", "Witnesses": "witness", "Passphrase": "passphrase-file",
	"MaxBytes": "max-unpack-bytes", "Dir": "out"}

// printJSON writes v as indented JSON, the form every --json flag prints.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
