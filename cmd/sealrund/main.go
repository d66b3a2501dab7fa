// Command sealrund is the sealrun daemon: config -> daemon.Main(ctx); signals; exit codes.
//
// Exit status: 0 stopped by SIGTERM/SIGINT, 1 the configuration is invalid (every problem is
// printed), 2 usage, 3 the daemon failed while running.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/sealrun/sealrun/buildinfo"
	"github.com/sealrun/sealrun/daemon"
	"github.com/sealrun/sealrun/hostconfig"
)

// Set by the build (make build).
var version, commit = "dev", "unknown"

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("sealrund", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", hostconfig.DefaultPath, "daemon configuration file")
	check := fs.Bool("check", false, "validate the configuration and exit")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: sealrund [--config FILE] [--check]\n\nThe sealrun daemon: runs sealed benchmark runs and serves the admin API on its socket\n(/run/sealrun/sealrun.sock). Logs go to stderr (the systemd journal under the unit).\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sealrund: unexpected argument %q; sealrund takes only flags\n", fs.Arg(0))
		return 2
	}
	if err := buildinfo.CheckSeamEnv(); err != nil {
		fmt.Fprintf(stderr, "sealrund: %v; nothing was started\n", err)
		return 1
	}
	cfg, err := hostconfig.Load(*config)
	if err != nil {
		fmt.Fprintf(stderr, "sealrund: the configuration is not valid; nothing was started:\n%v\n", err)
		return 1
	}
	if *check {
		fmt.Fprintf(stderr, "sealrund: %s is valid\n", *config)
		return 0
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "sealrund: runs as root on Linux (it drives runc, cgroups and network namespaces)")
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := daemon.Main(ctx, cfg, log, version, commit, notifyReady); err != nil && !errors.Is(err, context.Canceled) {
		log.Error("sealrund stopped", "err", err)
		return 3
	}
	log.Info("sealrund stopped")
	return 0
}

// notifyReady tells systemd (Type=notify) that the socket accepts requests: the sd_notify
// protocol, one datagram to $NOTIFY_SOCKET.
func notifyReady() {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return
	}
	defer c.Close()
	c.Write([]byte("READY=1"))
}
