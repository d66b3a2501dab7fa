package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/client"
)

// detachKeys end an attach and leave the shell running (as docker attach's): ^P then ^Q.
var detachKeys = []byte{0x10, 0x11}

func newAttachCmd() *cobra.Command {
	var socket, sshAuth, reason string
	var watch, takeOver bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "attach RUN [--watch]",
		Short: "Take the terminal of a human run (or watch it, read-only)",
		Long: `Attach gives you the terminal of a human run (sealrun run --agent human/HANDLE): a shell in the
run's sealed controller, with runner, the workspace and the brief, and no more than an agent has
(no GPU, no Python, no network but runner). The run's clock starts at its first attach (or when the
track's human.start has passed without one) and never stops.

Detach with ^P ^Q: the shell and everything running in it go on, and attaching again returns to
it; a dropped connection detaches too. Only one person holds the terminal: a second attach takes it
from the first. Only the run's person attaches (the account, and the ssh key, it was queued
for: sealrun run --person); an operator may take the terminal over, explicitly and recorded in
the run's audit log and attestation (--take-over --reason TEXT). --watch lets a proctor named for
the run (sealrun run --proctor), or an operator, watch read-only (^C stops watching). The run ends on
runner finalize or at its deadline, as an agent's does; exit or ^D in the shell starts a new one.
Everything typed and shown is recorded (asciicast v2), hashed into the run's audit log as it is
written, and published with the run.

People on other machines reach it through ssh, with a ForceCommand (docs/OPERATOR.md, "Human
runs"): the admin socket is only for users in the sealrun group.`,
		Args: exactArgs(1, "one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o := client.AttachOptions{Watch: watch}
			if takeOver {
				if reason == "" {
					return usage(errors.New("--take-over needs --reason TEXT: why the operator takes the person's terminal (it is published with the run)"))
				}
				if watch {
					return usage(errors.New("--take-over and --watch: a proctor's view is read-only; take the terminal over without --watch"))
				}
				if err := api.CheckPauseReason(reason); err != nil {
					return usage(fmt.Errorf("--reason: %v", err))
				}
				o.Takeover = reason
			} else if reason != "" {
				return usage(errors.New("--reason goes with --take-over"))
			}
			if sshAuth != "" {
				fp, err := sshAuthKey(sshAuth)
				if err != nil {
					return err
				}
				o.Key = fp
			}
			return attach(cmd, client.New(socket), args[0], o, wait)
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().BoolVar(&watch, "watch", false, "watch read-only (a proctor, or an operator)")
	cmd.Flags().BoolVar(&takeOver, "take-over", false, "an operator takes the person's terminal over (with --reason; recorded)")
	cmd.Flags().StringVar(&reason, "reason", "", "why the operator takes the terminal over (published with the run)")
	cmd.Flags().StringVar(&sshAuth, "ssh-auth", "", `the file sshd's ExposeAuthInfo names ("$SSH_USER_AUTH"): the ssh key the person authenticated with (the ForceCommand passes it)`)
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for a queued or preparing run to open its terminal")
	return cmd
}

// attach waits for the run's terminal to open, then relays the local terminal to it until the
// attachment ends.
func attach(cmd *cobra.Command, c *client.Client, id string, o client.AttachOptions, wait time.Duration) error {
	watch := o.Watch
	ctx := cmd.Context()
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	inFd, outFd := int(os.Stdin.Fd()), int(os.Stdout.Fd())
	tty := term.IsTerminal(inFd) && term.IsTerminal(outFd)
	if tty {
		o.Cols, o.Rows, _ = term.GetSize(outFd)
	}
	deadline := time.Now().Add(wait)
	var a *client.Attachment
	var said time.Time
	for {
		var err error
		if a, err = c.AttachWith(ctx, id, o); err == nil {
			break
		}
		if !api.IsCode(err, api.CodeNotYetRunning) || time.Now().After(deadline) {
			return err
		}
		if time.Since(said) > 5*time.Second {
			fmt.Fprintf(stderr, "sealrun: %v (waiting up to %s more)\n", err, time.Until(deadline).Round(time.Second))
			said = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	defer a.Close()
	restore := func() {}
	if tty && !watch {
		old, err := term.MakeRaw(inFd)
		if err != nil {
			return fmt.Errorf("the local terminal cannot be put in raw mode: %w", err)
		}
		restore = func() { term.Restore(inFd, old) }
		fmt.Fprintf(stderr, "sealrun: attached to %s; detach with ^P ^Q\r\n", id)
	} else if watch {
		fmt.Fprintf(stderr, "sealrun: watching %s read-only; ^C stops watching\n", id)
	}
	defer restore()
	// The local window's size follows the local terminal.
	winch := make(chan os.Signal, 1)
	notifyResize(winch)
	defer signal.Stop(winch)
	go func() {
		for range winch {
			if c, r, err := term.GetSize(outFd); err == nil && !watch {
				a.Resize(c, r)
			}
		}
	}()
	if watch {
		intr := make(chan os.Signal, 1)
		signal.Notify(intr, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(intr)
		go func() { <-intr; a.Detach() }()
	} else {
		go relayInput(os.Stdin, a)
	}
	for {
		out, ended, err := a.Next()
		switch {
		case err != nil:
			restore()
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("sealrund closed the connection to %s's terminal; the shell goes on: sealrun attach %s", id, id)
			}
			return fmt.Errorf("the connection to %s's terminal: %w; the shell goes on: sealrun attach %s", id, err, id)
		case out != nil:
			stdout.Write(out)
		default:
			restore()
			fmt.Fprintf(stderr, "\nsealrun: %s\n", ended)
			if ended == "detached" {
				fmt.Fprintf(stderr, "sealrun: the shell goes on; sealrun attach %s returns to it\n", id)
			}
			return nil
		}
	}
}

// relayInput sends what is typed, until the detach keys (^P ^Q) or the end of input. A ^P not
// followed by ^Q is sent as typed.
func relayInput(in io.Reader, a *client.Attachment) {
	buf := make([]byte, 4096)
	held := false // a ^P read last, not yet sent
	for {
		n, err := in.Read(buf)
		if n > 0 {
			p := buf[:n]
			if held {
				if p[0] == detachKeys[1] {
					a.Detach()
					return
				}
				p = append([]byte{detachKeys[0]}, p...)
				held = false
			}
			if i := bytes.Index(p, detachKeys); i >= 0 {
				a.Input(p[:i])
				a.Detach()
				return
			}
			if p[len(p)-1] == detachKeys[0] {
				p, held = p[:len(p)-1], true
			}
			if len(p) > 0 && a.Input(p) != nil {
				return
			}
		}
		if err != nil {
			a.Detach()
			return
		}
	}
}

func newPauseCmd() *cobra.Command {
	var socket, reason string
	var length time.Duration
	cmd := &cobra.Command{
		Use:   "pause RUN --reason TEXT [--for DURATION]",
		Short: "Pause a human run, where its track allows pauses: its clock, shell and compute stop",
		Long: `Pause stops a human run's clock and freezes its person's shell and the compute call under way,
where the track allows pauses ([human] pauses: how long, in all, one run may be paused). The pause
ends with sealrun resume, or when --for (or what the allowance leaves) is up; its end moves the
deadline by its length. Each pause is the operator's to grant: its reason, who granted it and its
length are in the run's audit log, its attestation and its leaderboard row.`,
		Args: exactArgs(1, "one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := api.CheckPauseReason(reason); err != nil {
				return fmt.Errorf("--reason: %w", err)
			}
			if length < 0 {
				return fmt.Errorf("--for %s: give a positive length (such as 10m), or leave it out for what the track's allowance leaves", length)
			}
			r, err := client.New(socket).Pause(cmd.Context(), args[0], reason, length)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: paused at %s; its clock, shell and compute stand still until sealrun resume %s (or the pause's length is up)\n", r.ID, r.Paused.Local().Format(time.TimeOnly), r.ID)
			return nil
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().StringVar(&reason, "reason", "", "why (published with the run; required)")
	cmd.Flags().DurationVar(&length, "for", 0, "the pause's longest length (default: what the track's allowance leaves)")
	return cmd
}

func newResumeCmd() *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "resume RUN",
		Short: "End the pause of a human run: its deadline moves by the pause's length",
		Args:  exactArgs(1, "one run id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := client.New(socket).Resume(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: resumed; its deadline is now %s\n", r.ID, r.Deadline.Local().Format(time.TimeOnly))
			return nil
		},
	}
	addSocketFlag(cmd, &socket)
	return cmd
}

// MaxSSHAuthBytes bounds the ExposeAuthInfo file read.
const MaxSSHAuthBytes = 64 << 10

// sshAuthKey reads the file sshd's ExposeAuthInfo writes (one line per authentication method:
// "publickey TYPE BASE64 ...") and returns the public key's SHA256 fingerprint as ssh-keygen -lf
// prints it. Exactly one key must be there.
func sshAuthKey(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--ssh-auth: %w (sshd writes it where ExposeAuthInfo is yes: deploy/ssh/sealrun-attach.conf)", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSSHAuthBytes+1))
	if err != nil {
		return "", fmt.Errorf("--ssh-auth %s: %w", path, err)
	}
	if len(data) > MaxSSHAuthBytes {
		return "", fmt.Errorf("--ssh-auth %s: over %d bytes; not sshd's ExposeAuthInfo file", path, MaxSSHAuthBytes)
	}
	fp := ""
	for i, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != "publickey" {
			continue
		}
		if len(fields) < 3 {
			return "", fmt.Errorf("--ssh-auth %s:%d: a publickey line without its key (want \"publickey TYPE BASE64\")", path, i+1)
		}
		blob, err := base64.StdEncoding.DecodeString(fields[2])
		if err != nil || len(blob) == 0 {
			return "", fmt.Errorf("--ssh-auth %s:%d: the key is not base64 (%v)", path, i+1, err)
		}
		sum := sha256.Sum256(blob)
		k := "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
		if fp != "" && fp != k {
			return "", fmt.Errorf("--ssh-auth %s: more than one key authenticated (%s and %s); authenticate with one", path, fp, k)
		}
		fp = k
	}
	if fp == "" {
		return "", fmt.Errorf("--ssh-auth %s: no publickey line: the person did not authenticate with a key (set AuthenticationMethods publickey for people)", path)
	}
	return fp, nil
}
