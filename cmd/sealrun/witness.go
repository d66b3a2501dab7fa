package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/ledger/witness"
)

func newWitnessCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "witness serve|keygen|key",
		Short: "Run a witness: cosign other hosts' ledger heads only when they extend what it saw",
		Long: `A witness is the outside party a run ledger's heads are shown to. It serves the C2SP tlog-witness
protocol (POST /add-checkpoint) for the logs it follows, each named by its note verifier key
(sealrun ledger vkey prints a host's). It cosigns a checkpoint only when the log's key signed it
and a consistency proof shows it extends the last one it cosigned for that log; it keeps that
size and root hash durably before it answers. A host that shows readers one ledger and keeps
another cannot get both cosigned by the same witness.

  keygen   make the witness's key (its private key file, and the public key to publish)
  key      print the public key of a private key file
  serve    serve add-checkpoint

Any lab, university or rival operator can run one for another's host: docs/OPERATOR.md says how.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usage(errors.New("missing subcommand: serve, keygen or key"))
			}
			return usage(fmt.Errorf("unknown subcommand %q: serve, keygen or key", args[0]))
		},
		RunE: func(*cobra.Command, []string) error { return nil },
	}
	cmd.AddCommand(newWitnessKeygenCmd(), newWitnessKeyCmd(), newWitnessServeCmd())
	return cmd
}

func newWitnessKeygenCmd() *cobra.Command {
	var name, out string
	cmd := &cobra.Command{
		Use:   "keygen --name NAME --out FILE",
		Short: "Make a witness key: the private key file, and the public key to publish",
		Long: `Keygen makes an Ed25519 cosigner key (C2SP tlog-cosignature v1) named --name (a schema-less URL
that names the witness, like witness.example.org/w1), writes its private key to --out (mode 0600;
an existing file is never overwritten) and prints the public key in the vkey form readers pass to
--witness and hosts list in sealrun.toml's [[witnesses]].`,
		Example: `  sealrun witness keygen --name witness.example.org/w1 --out /etc/sealrun-witness/key`,
		Args:    exactArgs(0, "no arguments (--name and --out)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if name == "" || out == "" {
				return usage(errors.New("give the witness's name with --name and the private key file to write with --out"))
			}
			if _, err := os.Lstat(out); err == nil {
				return usage(fmt.Errorf("%s exists: a witness key is never overwritten (a new key is a new witness); remove it first if that is what you want", out))
			}
			skey, vkey, err := witness.GenerateKey(name)
			if err != nil {
				return usage(err)
			}
			if err := fileio.WriteFile(out, []byte(skey+"\n"), 0o600); err != nil {
				return ioError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", vkey)
			fmt.Fprintf(cmd.ErrOrStderr(), "private key written to %s; the line above is the public key to publish\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the witness's name (a schema-less URL)")
	cmd.Flags().StringVar(&out, "out", "", "the private key file to write")
	return cmd
}

func readCosigner(path string) (*witness.Cosigner, error) {
	b, err := fileio.ReadLimited(path, "witness key", 4<<10)
	if err != nil {
		return nil, ioError(err)
	}
	c, err := witness.NewCosigner(string(b))
	if err != nil {
		return nil, invalid(fmt.Errorf("%s: %w", path, err))
	}
	return c, nil
}

func newWitnessKeyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key FILE",
		Short: "Print the public key of a witness's private key file",
		Args:  exactArgs(1, "the private key file"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := readCosigner(args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), c.VerifierKey())
			return nil
		},
	}
	return cmd
}

// readLogKeys reads the logs a witness follows: vkeys from --log and from --logs files (one per
// line, # comments), grouped by origin.
func readLogKeys(flags, files []string) ([]witness.Log, error) {
	type src struct{ vkey, where string }
	var all []src
	for _, f := range flags {
		all = append(all, src{f, "--log"})
	}
	for _, path := range files {
		b, err := fileio.ReadLimited(path, "logs file", 1<<20)
		if err != nil {
			return nil, ioError(err)
		}
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for n := 1; sc.Scan(); n++ {
			l := strings.TrimSpace(sc.Text())
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			all = append(all, src{l, fmt.Sprintf("%s:%d", path, n)})
		}
	}
	byOrigin := map[string]*witness.Log{}
	var order []string
	for _, s := range all {
		v, err := witness.LogVerifier(s.vkey)
		if err != nil {
			return nil, usage(fmt.Errorf("%s: %w (sealrun ledger vkey prints a host's)", s.where, err))
		}
		l, ok := byOrigin[v.Name()]
		if !ok {
			l = &witness.Log{Origin: v.Name()}
			byOrigin[v.Name()] = l
			order = append(order, v.Name())
		}
		l.Keys = append(l.Keys, v)
	}
	var out []witness.Log
	for _, o := range order {
		out = append(out, *byOrigin[o])
	}
	return out, nil
}

func newWitnessServeCmd() *cobra.Command {
	var keyFile, stateDir, listen string
	var logs, logFiles, proxies []string
	var rate, logRate float64
	cmd := &cobra.Command{
		Use:   "serve --key FILE --state DIR --log VKEY... [--listen ADDR]",
		Short: "Serve add-checkpoint (C2SP tlog-witness) for the logs given",
		Long: `Serve answers POST /add-checkpoint for each log given with --log (a host's note verifier key, from
sealrun ledger vkey; repeatable) or listed in --logs files (one key per line). It keeps, in
--state (witness-heads.jsonl), the size and root hash it last cosigned for each log, written and
fsynced before it answers; never delete that file, and never put an older copy in its place (a
witness that forgets a size can be made to cosign a rolled-back log). One process holds a state:
a second serve on it refuses to start, naming the first; the state must be on a local file
system (not NFS, SMB, Ceph or FUSE).

What cannot be a checkpoint of a log it follows (malformed, another origin, no signature line of
the log's key) is refused before it is counted. The rest is bounded per client (--rate; a client
is an IPv4 address or an IPv6 /64) and what moves a log's head per log (--log-rate). Behind a
reverse proxy, name it with --trusted-proxy: the client is then the address the proxy puts in
X-Forwarded-For (docs/OPERATOR.md has the nginx configuration); without it every client shares
the proxy's budget. Each cosignature is a line on stderr; refusals at most five a second, each
line counting those not logged.

The statuses are the protocol's: 200 and the cosignature line; 404 a log it does not follow; 403
no signature by the log's key; 409 an old size other than the one it holds (the body is that
size), or the same size with another root hash; 422 a consistency proof that does not verify;
400 a malformed request; 429 over a budget (Retry-After says when to come back).`,
		Example: `  sealrun witness serve --key /etc/sealrun-witness/key --state /var/lib/sealrun-witness \
    --log 'sealrun.ledger/gpu-node-07+1a2b3c4d+AW3x...' --listen 127.0.0.1:7380 --trusted-proxy 127.0.0.1`,
		Args: exactArgs(0, "no arguments (the logs are --log or --logs)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" || stateDir == "" {
				return usage(errors.New("give the witness's private key with --key (sealrun witness keygen makes one) and its state directory with --state"))
			}
			ls, err := readLogKeys(logs, logFiles)
			if err != nil {
				return err
			}
			trusted, err := witness.ParseProxies(proxies)
			if err != nil {
				return usage(fmt.Errorf("--trusted-proxy: %w", err))
			}
			if rate <= 0 || logRate <= 0 {
				return usage(errors.New("--rate and --log-rate are per second, above 0"))
			}
			if len(ls) == 0 {
				return usage(errors.New("give at least one log to follow with --log VKEY or --logs FILE"))
			}
			c, err := readCosigner(keyFile)
			if err != nil {
				return err
			}
			st, err := witness.OpenStore(stateDir)
			if err != nil {
				return ioError(err)
			}
			defer st.Close()
			lg := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
			srv, err := witness.NewServer(witness.Config{Signer: c, Logs: ls, Store: st, Log: lg, Rate: rate, LogRate: logRate, TrustedProxies: trusted})
			if err != nil {
				return usage(err)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return ioError(fmt.Errorf("listen on %s: %w", listen, err))
			}
			for _, l := range ls {
				h := st.Head(l.Origin)
				lg.Info("following", "origin", l.Origin, "keys", len(l.Keys), "cosigned_size", h.Size)
			}
			if ap, err := netip.ParseAddrPort(ln.Addr().String()); err == nil && ap.Addr().IsLoopback() && len(trusted) == 0 {
				lg.Warn("serving on loopback with no --trusted-proxy: behind a proxy, every client shares the proxy's budget (--rate); name the proxy with --trusted-proxy (docs/OPERATOR.md)")
			}
			fmt.Fprintf(cmd.OutOrStdout(), "witness %s on http://%s (public key %s)\n", c.Name(), ln.Addr(), c.VerifierKey())
			return serveWitness(cmd.Context(), ln, srv)
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "the witness's private key file")
	cmd.Flags().StringVar(&stateDir, "state", "", "the directory of its cosigned heads")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:7380", "the address to serve on")
	cmd.Flags().StringArrayVar(&logs, "log", nil, "a log to follow: its note verifier key (repeatable)")
	cmd.Flags().StringArrayVar(&logFiles, "logs", nil, "a file of log keys, one per line (repeatable)")
	cmd.Flags().Float64Var(&rate, "rate", 20, "requests per second per client, an IPv4 address or IPv6 /64 (a burst of twice that)")
	cmd.Flags().Float64Var(&logRate, "log-rate", 10, "moves of one log's head per second (a burst of twice that)")
	cmd.Flags().StringArrayVar(&proxies, "trusted-proxy", nil, "a reverse proxy (address or CIDR; repeatable) whose X-Forwarded-For names the client")
	return cmd
}

func serveWitness(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 15 * time.Second, WriteTimeout: 15 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 8 << 10}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return ioError(err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
		return nil
	}
}
