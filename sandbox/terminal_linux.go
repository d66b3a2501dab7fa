package sandbox

// A container with a terminal (ContainerConfig.Terminal). The runtime makes the container's own
// terminal inside (process.terminal in the spec); sealrun keeps a master side of it
// (Container.Console): what the container shows is read from it, what a person types is written
// to it, a window size set on it reaches the container.
//
//   - runc, in the foreground, relays between the container's terminal and its own stdio, which
//     must be a terminal: sealrun gives it the slave of a pty of its own, as its controlling
//     terminal in a session of its own, so that a window size set on the master reaches runc as
//     SIGWINCH, which passes it on (ptyIO). runc ignores a console socket unless detached.
//   - crun, in the foreground, neither sizes the container's terminal nor passes SIGWINCH on: it
//     is given a console socket instead, and sends the container's terminal master itself there
//     (consoleSocket), which sealrun reads, writes and sizes directly. One terminal, not two.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// openPty opens a new pseudo-terminal pair: the master, and the slave the runtime gets.
func openPty() (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock the pty: %w", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("the pty's number: %w", err)
	}
	name := "/dev/pts/" + strconv.Itoa(n)
	sfd, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	return master, os.NewFile(uintptr(sfd), name), nil
}

// SetWinsize sets a terminal's window size (rows and columns, each 1 to 4096).
func SetWinsize(f *os.File, cols, rows int) error {
	if cols < 1 || rows < 1 || cols > 4096 || rows > 4096 {
		return fmt.Errorf("window size %dx%d: columns and rows are 1 to 4096", cols, rows)
	}
	return unix.IoctlSetWinsize(int(f.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: uint16(rows), Col: uint16(cols)})
}

// ptyIO is the runtime's stdio when the container has a terminal: the slave of a pty, its
// controlling terminal in a session of its own (so that a window size set on the master signals
// it). It meets go-runc's IO and StartCloser.
type ptyIO struct {
	master, slave *os.File
}

func newPtyIO(cols, rows int) (*ptyIO, error) {
	m, s, err := openPty()
	if err != nil {
		return nil, err
	}
	if cols == 0 || rows == 0 {
		cols, rows = 80, 24
	}
	if err := SetWinsize(m, cols, rows); err != nil {
		m.Close()
		s.Close()
		return nil, err
	}
	return &ptyIO{master: m, slave: s}, nil
}

func (p *ptyIO) Set(cmd *exec.Cmd) {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = p.slave, p.slave, p.slave
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// A new session whose controlling terminal is the slave (fd 0 in the child); a session
	// leader cannot also change its process group.
	cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = true, true, 0
	cmd.SysProcAttr.Setpgid = false
}

// CloseAfterStart closes sealrun's copy of the slave: once the runtime and the container are
// gone, reading the master ends.
func (p *ptyIO) CloseAfterStart() error { return p.slave.Close() }

func (p *ptyIO) Stdin() io.WriteCloser { return p.master }
func (p *ptyIO) Stdout() io.ReadCloser { return ptyReader{p.master} }
func (p *ptyIO) Stderr() io.ReadCloser { return io.NopCloser(eofReader{}) }
func (p *ptyIO) Close() error          { p.slave.Close(); return p.master.Close() }

// ptyReader reads a pty's master: the kernel answers EIO once no slave is open, which is its
// end of file.
type ptyReader struct{ f *os.File }

func (r ptyReader) Read(b []byte) (int, error) {
	n, err := r.f.Read(b)
	if errors.Is(err, syscall.EIO) {
		err = io.EOF
	}
	return n, err
}

func (r ptyReader) Close() error { return nil }

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// consoleSocket is a console socket (the OCI runtime's --console-socket): a listening Unix
// socket the runtime connects to, once, to send the container terminal's master.
type consoleSocket struct {
	dir string
	l   *net.UnixListener
}

func newConsoleSocket() (*consoleSocket, error) {
	dir, err := os.MkdirTemp("", "sealrun-console-")
	if err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, "console.sock"), Net: "unix"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &consoleSocket{dir: dir, l: l}, nil
}

// Path is the socket's path (go-runc's ConsoleSocket).
func (s *consoleSocket) Path() string { return filepath.Join(s.dir, "console.sock") }

// receive waits until timeout for the runtime to send the master.
func (s *consoleSocket) receive(timeout time.Duration) (*os.File, error) {
	s.l.SetDeadline(time.Now().Add(timeout))
	conn, err := s.l.AcceptUnix()
	if err != nil {
		return nil, fmt.Errorf("the runtime never sent the container's terminal: %w", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	n, oobn, _, _, err := conn.ReadMsgUnix(name, oob)
	if err != nil {
		return nil, fmt.Errorf("read the container's terminal from the runtime: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("the runtime sent no terminal (%d control messages, %v)", len(msgs), err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("the runtime sent %d descriptors for the terminal (%v)", len(fds), err)
	}
	unix.CloseOnExec(fds[0])
	return os.NewFile(uintptr(fds[0]), string(name[:n])), nil
}

func (s *consoleSocket) Close() error {
	s.l.Close()
	return os.RemoveAll(s.dir)
}
