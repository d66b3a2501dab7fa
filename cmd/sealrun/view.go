package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/view"
)

func newViewCmd() *cobra.Command {
	var socket, listen string
	cmd := &cobra.Command{
		Use:   "view [--listen 127.0.0.1:8765]",
		Short: "Serve a read-only web viewer of this host's runs: what each agent did, live",
		Long: `View serves a web viewer of the runs sealrund holds, read over its admin socket as you: only a
user who may use sealrun (root, or the sealrun group) can start it. It lists the runs, with
filters by track, agent and state, and shows each run's transcript — every model exchange as
messages, each compute call with its output, submissions, validation scores and the clock on
one time axis, with search and a jump to each failure. A running run's page follows it: a new
model turn or call is on screen within a second of its audit entry.

It listens on loopback by default. The URL it prints carries a random token (kept in a cookie
after the first page): another user of this machine who finds the port gets nothing without it.
--listen on another address serves anyone on that network who has the URL; prefer an SSH tunnel
(ssh -L 8765:127.0.0.1:8765 host). The viewer changes nothing: it only reads.`,
		Example: `  sealrun view
  ssh -L 8765:127.0.0.1:8765 gpu-host 'sealrun view'   # then open the printed URL here`,
		Args: exactArgs(0, "no arguments (--listen sets the address)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := client.New(socket)
			if _, err := c.Runs(cmd.Context(), false, 1); err != nil {
				return err
			}
			host, _, err := net.SplitHostPort(listen)
			if err != nil {
				return usage(fmt.Errorf("--listen %q: give HOST:PORT, for example 127.0.0.1:8765", listen))
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("listen on %s: %w; give another with --listen 127.0.0.1:PORT (port 0 picks a free one)", listen, err)
			}
			addr := ln.Addr().String()
			v, err := view.New(c, addr)
			if err != nil {
				ln.Close()
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: serving on %s, not loopback: anyone on that network with the URL below can read every run of this host\n", addr)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sealrun view: open %s\n(read-only, as %s sees sealrund at %s; Ctrl-C stops it)\n", v.URL(addr), currentUser(), socket)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv := &http.Server{Handler: v.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				srv.Shutdown(sctx)
				srv.Close()
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	addSocketFlag(cmd, &socket)
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8765", "the address to serve on (HOST:PORT; port 0 picks a free one)")
	return cmd
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return fmt.Sprintf("uid %d", os.Getuid())
}
