package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/buildinfo"
	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/runner"
	"github.com/sealrun/sealrun/sandbox"
)

// Main is sealrund: it loads the signing key (and checks it against its public half), opens the
// journal and reconciles, serves the admin API on the socket and runs the queue until ctx ends.
// ready is called once the socket accepts requests (sd_notify READY=1).
func Main(ctx context.Context, cfg *hostconfig.Config, log *slog.Logger, version, commit string, ready func()) error {
	if len(cfg.Resources.GPUs) > 0 {
		if _, err := sandbox.ResolveGPUs(cfg.CDIDirs(), cfg.Resources.GPUs); err != nil {
			return fmt.Errorf("%s:resources.gpus: %w (sealrun doctor lists the CDI devices of this host)", cfg.File, err)
		}
	}
	h, store, err := hostOf(cfg)
	if err != nil {
		return err
	}
	var pass []byte
	if cfg.Keys.PassphraseFile != "" {
		if pass, err = os.ReadFile(cfg.Keys.PassphraseFile); err != nil {
			return fmt.Errorf("%s:keys.passphrase_file: %w", cfg.File, fileio.Cause(err))
		}
		pass = []byte(strings.TrimRight(string(pass), "\r\n"))
	}
	signer, err := attest.LoadSigner(ctx, cfg.Keys.Signing, pass)
	if err != nil {
		return fmt.Errorf("%s:keys.signing: %w", cfg.File, err)
	}
	if err := checkKeyPair(signer, cfg.Keys.Public); err != nil {
		return fmt.Errorf("%s:keys.public: %w", cfg.File, err)
	}
	x := &Executor{Cfg: cfg, Host: h, Store: store, Signer: signer, Version: version, Commit: commit}
	if err := x.readSeamEnv(log); err != nil {
		return err
	}
	b, err := buildinfo.CurrentBuild(version, commit)
	if err != nil {
		return err
	}
	helpers := map[string]string{"runner": cfg.Runner, "sealrun-netns-hook": cfg.Hook, sandbox.RelayBinary: fileio.Beside(cfg.Hook, sandbox.RelayBinary)}
	if shim := runner.ShimFor(cfg.Runner); shim != cfg.Runner {
		helpers[runner.ExecShim] = shim
	}
	if b.Helpers, err = buildinfo.HelperHashes(helpers); err != nil {
		return err
	}
	x.Build = &b
	if x.TSA, err = cfg.TSA(); err != nil {
		return fmt.Errorf("%s:timestamp.chain: %w", cfg.File, err)
	}
	if cfg.TPM.Enabled() {
		if x.TPM, err = OpenTPM(cfg, &b); err != nil {
			return err
		}
		defer x.TPM.Close()
		log.Info("sealrund measured into the TPM", "pcr", x.TPM.sealrundPCR, "sha256", b.DaemonSHA256, "starts_this_boot", len(x.TPM.events), "quoted_pcrs", fmt.Sprint(x.TPM.pcrs))
	}
	log.Info("sealrund build", "version", b.Version, "commit", b.Commit, "modified", b.Modified, "go", b.GoVersion, "sha256", b.DaemonSHA256, "test_seams", b.TestSeams)
	d, err := New(ctx, cfg, x, log)
	if err != nil {
		return err
	}
	defer d.Close()
	l, err := Listen(cfg)
	if err != nil {
		return err
	}
	defer os.Remove(cfg.Socket)
	errc := make(chan error, 1)
	go func() { errc <- d.ServeAPI(ctx, l) }()
	if addr := cfg.Metrics.Listen; addr != "" {
		go func() {
			if err := d.metrics.serve(ctx, addr); err != nil {
				log.Error("metrics listener", "addr", addr, "err", err)
			}
		}()
	}
	pl := h.Placement()
	shim := runner.ShimFor(cfg.Runner)
	if shim == cfg.Runner {
		log.Warn("no "+runner.ExecShim+" beside the runner binary: compute calls start through `runner _exec`, a millisecond or two slower each; make install puts it there", "runner", cfg.Runner)
	}
	log.Info("sealrund ready", "socket", cfg.Socket, "state", cfg.StateDir, "runs", len(d.Runs()), "cgroups", pl.Root, "placement", pl.Reason, "hook", h.HookCommand(), "call_shim", shim)
	if ready != nil {
		ready()
	}
	d.Serve(ctx)
	return <-errc
}

// checkKeyPair refuses a public key file that is not the signing key's public half: verifiers
// would reject every attestation this daemon signs.
func checkKeyPair(signer signature.Signer, pubPath string) error {
	pub, err := signer.PublicKey()
	if err != nil {
		return err
	}
	want, err := attest.KeyID(pub)
	if err != nil {
		return err
	}
	_, given, err := attest.LoadVerifier(pubPath)
	if err != nil {
		return err
	}
	got, err := attest.KeyID(given)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%s (key id %s) is not the public half of keys.signing (key id %s); give the matching public key (sealrun keys generate writes both)", pubPath, got, want)
	}
	return nil
}

// readSeamEnv arms the test seams from SEALRUND_TEST_* in a test build, each with a warning; a
// release build refuses to start while any is set (a seam set at run time is never silently
// ignored, nor honoured).
func (x *Executor) readSeamEnv(log *slog.Logger) error {
	if err := buildinfo.CheckSeamEnv(); err != nil {
		return err
	}
	if !buildinfo.TestSeams {
		return nil
	}
	x.Hold, x.TestOverlay, x.Entrypoint = os.Getenv("SEALRUND_TEST_HOLD"), os.Getenv("SEALRUND_TEST_OVERLAY"), strings.Fields(os.Getenv("SEALRUND_TEST_ENTRYPOINT"))
	x.KillAfter = os.Getenv("SEALRUND_TEST_KILL_AFTER")
	if s := x.seamsUsed(); len(s) > 0 {
		log.Warn("test build: test seams set; runs record them in their attestations (build.seams_used)", "seams", strings.Join(s, ","))
	}
	return nil
}
