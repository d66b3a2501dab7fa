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
	case "_await": // the same, in a container started before its call: the call on stdin
		if len(args) != 1 {
			break
		}
		return awaitCall(os.Stdin, stderr)
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

// Bounds of a call _await reads (runner.MaxBodyBytes, runner.MaxArgs).
const (
	maxCall     = 1 << 20
	maxCallArgs = 256
)

// awaitCall reads a call from stdin as runner.EncodeCall writes it, until the runner service
// closes it, sets the variables it adds and runs it as _exec does. cmd/runner-exec's _await does
// the same in C (TestExecShimsAgree).
func awaitCall(stdin io.Reader, stderr io.Writer) int {
	malformed := func(why string) int {
		fmt.Fprintf(stderr, "runner _await: malformed call from the runner service: %s\n", why)
		return 2
	}
	b, err := io.ReadAll(io.LimitReader(stdin, maxCall+1))
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "runner _await: read the call: %v\n", err)
		return exitRefused
	case len(b) > maxCall:
		return malformed("over 1 MiB")
	case len(b) == 0:
		return malformed("none came (stdin was closed empty)")
	case b[len(b)-1] != 0:
		return malformed("its last field has no NUL")
	}
	var cwd string
	var argv []string
	haveCwd := false
	for _, f := range strings.Split(string(b[:len(b)-1]), "\x00") {
		if f == "" {
			return malformed("a field of unknown kind")
		}
		v := f[1:]
		switch {
		case f[0] == 'C':
			if haveCwd {
				return malformed("a second directory")
			}
			if !strings.HasPrefix(v, "/") {
				return malformed("the directory is not absolute")
			}
			cwd, haveCwd = v, true
		case f[0] == 'E':
			k, val, ok := strings.Cut(v, "=")
			if !haveCwd || len(argv) > 0 {
				return malformed("a variable out of order")
			}
			if !ok || k == "" {
				return malformed("a variable that is not KEY=VALUE")
			}
			if os.Setenv(k, val) != nil {
				return malformed("a variable that cannot be set")
			}
		case f[0] == 'A':
			if !haveCwd {
				return malformed("an argument before the directory")
			}
			if len(argv) == maxCallArgs {
				return malformed("over 256 arguments")
			}
			argv = append(argv, v)
		default:
			return malformed("a field of unknown kind")
		}
	}
	if !haveCwd {
		return malformed("no directory")
	}
	if len(argv) == 0 || argv[0] == "" {
		return malformed("no command")
	}
	return execCombined(append([]string{"--cwd", cwd, "--"}, argv...), stderr)
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
