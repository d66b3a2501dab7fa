// Command runner is the static client mounted into the controller as /usr/local/bin/runner. It
// talks to the sealrun daemon over the run's agent socket (/run/sealrun/agent.sock); all compute
// of a sealed run goes through it. It uses the standard library only and prints nothing but the
// protocol's text (runner/PROTOCOL.md).
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

const usageText = `Usage: runner COMMAND [ARGS...]

Every compute call of a sealed run goes through runner. Each response starts with a line on
stderr saying the time left in the run.

  runner [--env K=V]... CMD [ARGS...]
                           run CMD in a fresh GPU container (no network, /workspace shared,
                           the current directory kept when it is inside /workspace); output is
                           streamed; the exit status is CMD's, 124 if the call limit killed it,
                           125 if the call was refused (with the reason)
  runner -- CMD [ARGS...]  the same, for a CMD named like one of the verbs below
  runner time_left         the time left, and when the reserve window starts
  runner status            the run: phase, the call running, submissions
  runner submit DIR        pack DIR as a candidate bundle, score it on the validation set
  runner promote ID        mark candidate ID (or a unique prefix) as the one to grade
  runner finalize [ID]     promote ID if given, and end the run now
  runner history           every candidate: id, time, size, validation score, promoted
  runner posture           print what this sandbox looks like from inside (JSON; used by
                           sealrun sandbox probe)
`

// Wire constants (runner/protocol.go; this client imports nothing of sealrun's).
const (
	socketPath  = "/run/sealrun/agent.sock"
	exitRefused = 125
	maxFrame    = 1 << 20
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usageText)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cwd, _ := os.Getwd()
	if cwd != "/workspace" && !strings.HasPrefix(cwd, "/workspace/") {
		cwd = "" // the service runs the call in /workspace
	}
	switch args[0] {
	case "posture":
		return runPosture(args[1:], stdout, stderr)
	case "_exec": // inside a runner container: the call's own process (see runner.ShimPath)
		return execCombined(args[1:], stderr)
	case "time_left", "status", "history":
		if len(args) != 1 {
			fmt.Fprintf(stderr, "runner %s takes no arguments\n", args[0])
			return 2
		}
		return request("/v1/"+args[0], struct{}{}, stdout, stderr)
	case "submit", "promote":
		if len(args) != 2 {
			fmt.Fprintf(stderr, "runner %s takes one argument: runner %s %s\n", args[0], args[0], map[string]string{"submit": "DIR", "promote": "ID"}[args[0]])
			return 2
		}
		return request("/v1/"+args[0], map[string]string{"arg": args[1], "cwd": cwd}, stdout, stderr)
	case "finalize":
		if len(args) > 2 {
			fmt.Fprintln(stderr, "runner finalize takes at most one argument: runner finalize [ID]")
			return 2
		}
		arg := ""
		if len(args) == 2 {
			arg = args[1]
		}
		return request("/v1/finalize", map[string]string{"arg": arg}, stdout, stderr)
	}
	var env []string
	for len(args) > 0 {
		if args[0] == "--" {
			args = args[1:]
			break
		}
		if args[0] == "--env" && len(args) > 1 {
			env, args = append(env, args[1]), args[2:]
			continue
		}
		if v, ok := strings.CutPrefix(args[0], "--env="); ok {
			env, args = append(env, v), args[1:]
			continue
		}
		break
	}
	if len(args) == 0 {
		fmt.Fprintln(stderr, "runner: no command given; runner [--env K=V]... CMD [ARGS...]")
		return 2
	}
	return request("/v1/call", map[string]any{"argv": args, "cwd": cwd, "env": env}, stdout, stderr)
}

// request sends one request over the agent socket and copies the framed response out.
func request(path string, body any, stdout, stderr io.Writer) int {
	sock := socketPath
	if s := os.Getenv("SEALRUN_AGENT_SOCKET"); s != "" {
		sock = s // operators debugging a kit outside a run
	}
	b, _ := json.Marshal(body)
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableCompression: true,
	}}
	resp, err := client.Post("http://sealrun"+path, "application/json", bytes.NewReader(b))
	if err != nil {
		fmt.Fprintf(stderr, "runner: cannot reach sealrun at %s (%v); runner works only inside a sealed run's controller\n", sock, unwrap(err))
		return exitRefused
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		fmt.Fprintf(stderr, "%s", msg)
		if len(msg) > 0 && msg[len(msg)-1] != '\n' {
			fmt.Fprintln(stderr)
		}
		return exitRefused
	}
	var hdr [5]byte
	buf := make([]byte, 64<<10)
	for {
		if _, err := io.ReadFull(resp.Body, hdr[:]); err != nil {
			fmt.Fprintln(stderr, "runner: the connection to sealrun ended before the exit status (the daemon stopped?)")
			return exitRefused
		}
		n := binary.BigEndian.Uint32(hdr[1:])
		if n > maxFrame {
			fmt.Fprintln(stderr, "runner: a malformed response from sealrun")
			return exitRefused
		}
		if int(n) > cap(buf) {
			buf = make([]byte, n)
		}
		p := buf[:n]
		if _, err := io.ReadFull(resp.Body, p); err != nil {
			fmt.Fprintln(stderr, "runner: the connection to sealrun ended mid-response")
			return exitRefused
		}
		switch hdr[0] {
		case 'o':
			stdout.Write(p)
		case 'e':
			stderr.Write(p)
		case 'x':
			code, err := strconv.Atoi(string(p))
			if err != nil {
				return exitRefused
			}
			return code
		}
	}
}

func unwrap(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// execCombined makes stderr the same file as stdout, so the two keep the order the command
// wrote them in, and replaces this process with the command (looked up in PATH). cmd/runner-exec
// does the same in C, faster to start; the runner service prefers it where it is installed, and
// TestExecShimsAgree holds the two to one behaviour.
func execCombined(argv []string, stderr io.Writer) int {
	if len(argv) >= 2 && argv[0] == "--cwd" {
		if err := os.Chdir(argv[1]); err != nil {
			fmt.Fprintf(stderr, "runner: cd %s: %v\n", argv[1], err)
			return exitRefused
		}
		argv = argv[2:]
	}
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	}
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "runner _exec: no command")
		return 2
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			fmt.Fprintf(stderr, "runner: %s: command not found\n", path)
			return 127
		}
		path = p
	} // a path with a slash goes to execve as given, relative to cwd, as a shell does
	if err := syscall.Dup3(1, 2, 0); err != nil {
		fmt.Fprintf(stderr, "runner: dup stdout: %v\n", err)
		return exitRefused
	}
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "runner: %s: %v\n", argv[0], err)
	if errors.Is(err, syscall.ENOENT) {
		return 127
	}
	return 126
}
