package sandbox

// The network hook's relay: where the small C program sealrun-hook-relay is installed beside
// the hook binary, the runtime runs it as the createRuntime hook instead of the Go hook, and it
// hands the hook's arguments and the container's state to this process over an abstract unix
// socket; the work (netnshook.Handle, the same code) is done here, on a locked thread switched
// back afterwards. The runtime waits for the hook at every container start, and a Go program
// takes longer to start than the hook's whole work, the more so on a busy host; the C relay a
// fraction of that (make bench's go-hook-ms against sealrun-ms).

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/sandbox/netnshook"
)

// RelayBinary is the name of the hook's relay, looked for beside the hook binary.
const RelayBinary = "sealrun-hook-relay"

// relayRequestMax bounds a request: four arguments and the state.
const relayRequestMax = netnshook.MaxState + 64<<10

// relayTimeout bounds one request's reading and handling (the runtime's own hook timeout is 30 s).
const relayTimeout = 20 * time.Second

// HookCommand is what the runtime runs as the network hook of this host's containers: the relay,
// or the Go hook where the relay is not installed beside it.
func (h *Host) HookCommand() string {
	if h.relayPath != "" {
		return h.relayPath
	}
	return h.hookPath
}

// findRelay is the relay beside the hook binary at hookPath, or "" where there is none.
func findRelay(hookPath string) string { return fileio.Beside(hookPath, RelayBinary) }

// The relay's server: one per process, whichever hosts it has, listening until the process ends
// on an abstract socket (no file to leave behind; unreachable from any other network namespace,
// so from no container) whose name has 128 random bits.
var relayServer struct {
	once sync.Once
	name string
	err  error
}

// startRelay starts the process's relay server once and returns its socket's name.
func startRelay() (string, error) {
	relayServer.once.Do(func() {
		var b [16]byte
		rand.Read(b[:])
		name := fmt.Sprintf("sealrun-hook-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: "@" + name, Net: "unix"})
		if err != nil {
			relayServer.err = fmt.Errorf("network hook relay: listen on @%s: %w", name, err)
			return
		}
		relayServer.name = name
		go serveRelay(l)
	})
	return relayServer.name, relayServer.err
}

func serveRelay(l *net.UnixListener) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond) // out of descriptors, say: the runtime's hook waits
			continue
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(relayTimeout))
			reply := "ok"
			switch err := handleRelay(c); {
			case errors.Is(err, errRefusedAnswered):
				return
			case err != nil:
				reply = err.Error()
			}
			c.Write([]byte(reply))
		}()
	}
}

// errRefusedAnswered: a peer was refused and has its answer already.
var errRefusedAnswered = errors.New("relay: refused, answered")

// handleRelay serves one hook: the peer must be root (the runtime runs hooks as root; anyone
// else on the host who finds the socket's name is refused), and its request is the hook's four
// arguments, each ended by a NUL, then the container's state.
func handleRelay(c *net.UnixConn) error {
	began := time.Now()
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return err
	}
	if cerr != nil {
		return fmt.Errorf("relay: peer credentials: %w", cerr)
	}
	if cred.Uid != 0 {
		// Nothing of its request is kept: the reason goes back, what it sent is read away
		// (bounded, within the deadline) so that it gets the reason rather than a reset.
		c.Write([]byte(fmt.Sprintf("relay: refused: the peer is uid %d; only root's runtime may run the hook", cred.Uid)))
		c.CloseWrite()
		io.Copy(io.Discard, io.LimitReader(c, relayRequestMax))
		return errRefusedAnswered
	}
	req, err := io.ReadAll(io.LimitReader(c, relayRequestMax+1))
	if err != nil {
		return fmt.Errorf("relay: read request: %w", err)
	}
	args, st, err := parseRelayRequest(req)
	if err != nil {
		return err
	}
	// Handle leaves its thread in the container's netns; OnThread switches it back (or, if it
	// cannot, never lets the thread run anything else).
	return netnshook.OnThread(func() error { return netnshook.Handle(args, st, began) })
}

// parseRelayRequest splits a relay request into the hook's arguments and the container state.
func parseRelayRequest(req []byte) ([]string, specs.State, error) {
	var st specs.State
	if len(req) > relayRequestMax {
		return nil, st, fmt.Errorf("relay: request over %d bytes", relayRequestMax)
	}
	parts := bytes.SplitN(req, []byte{0}, 5)
	if len(parts) != 5 {
		return nil, st, fmt.Errorf("relay: request has %d arguments; want 4 (ROLE GATEWAY-NETNS EVIDENCE-FILE CGROUP-PATH), each ended by a NUL, then the state", len(parts)-1)
	}
	args := make([]string, 4)
	for i := range args {
		args[i] = string(parts[i])
	}
	if err := json.Unmarshal(parts[4], &st); err != nil {
		return nil, st, fmt.Errorf("relay: read container state: %w", err)
	}
	return args, st, nil
}
