package testenv

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Torchwood builds filippo.io/torchwood v0.6.1, from the Go module proxy, once: its litewitness,
// and twcheck, a few lines of ours over its cosignature signer and verifier. The binaries by name.
func Torchwood(t testing.TB) map[string]string {
	t.Helper()
	return GoTools(t, "torchwood-v0.6.1", map[string]string{
		"go.mod":  "module sealrun.test/twcheck\n\ngo 1.26\n",
		"main.go": twcheckSource,
	}, []string{"filippo.io/torchwood@v0.6.1", "filippo.io/torchwood/cmd/litewitness@v0.6.1"},
		map[string]string{"litewitness": "filippo.io/torchwood/cmd/litewitness", "twcheck": "."})
}

// twcheck: "verify NAME SEEDHEX FILE" opens the cosigned note in FILE with torchwood's
// CosignatureVerifier for that key and prints the key's vkey as torchwood writes it and the
// cosignature's time; "sign NAME SEEDHEX FILE" prints torchwood's cosignature line over the
// note text in FILE.
const twcheckSource = `package main

import (
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"os"

	"filippo.io/torchwood"
	"golang.org/x/mod/sumdb/note"
)

func main() {
	seed, _ := hex.DecodeString(os.Args[3])
	s, err := torchwood.NewCosignatureSigner(os.Args[2], ed25519.NewKeyFromSeed(seed))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	b, _ := os.ReadFile(os.Args[4])
	switch os.Args[1] {
	case "verify":
		n, err := note.Open(b, note.VerifierList(s.Verifier()))
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		ts, err := torchwood.CosignatureTimestamp(n.Sigs[0])
		fmt.Println(s.Verifier().String(), ts, err)
	case "sign":
		out, err := note.Sign(&note.Note{Text: string(b)}, s)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		os.Stdout.Write(out[len(b)+1:])
	}
}
`

// Litewitness runs torchwood's litewitness (nobody here wrote it) until the test ends: its key
// made with ssh-keygen and held in an ssh-agent, as it expects, and each log of logs (origin ->
// the log's vkey) added to its SQLite database as witnessctl would (with Debian's sqlite3). It
// returns the address it serves add-checkpoint on (plain HTTP, loopback) and its Ed25519 public
// key (witness.VKey makes its vkey).
func Litewitness(t testing.TB, name string, logs map[string]string) (addr string, pub ed25519.PublicKey) {
	t.Helper()
	tw := Torchwood(t)
	agentBin := RequireTool(t, "ssh-agent", "openssh-client")
	addBin := RequireTool(t, "ssh-add", "openssh-client")
	keygen := RequireTool(t, "ssh-keygen", "openssh-client")
	sqlite := RequireTool(t, "sqlite3", "sqlite3")
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "lw")
	if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "litewitness", "-f", keyFile).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	fp, err := exec.Command(keygen, "-l", "-E", "sha256", "-f", keyFile+".pub").Output()
	if err != nil {
		t.Fatal(err)
	}
	fingerprint := strings.Fields(string(fp))[1]
	sock := filepath.Join(dir, "agent.sock")
	agent := exec.Command(agentBin, "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	waitUntil(t, "ssh-agent's socket", func() bool { _, err := os.Stat(sock); return err == nil })
	add := exec.Command(addBin, keyFile)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v %s", err, out)
	}
	pubLine, _ := os.ReadFile(keyFile + ".pub")
	blob, _ := base64.StdEncoding.DecodeString(strings.Fields(string(pubLine))[1])
	pub = blob[len(blob)-ed25519.PublicKeySize:]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	db := filepath.Join(dir, "litewitness.db")
	lw := exec.Command(tw["litewitness"], "-name", name, "-db", db, "-ssh-agent", sock, "-key", fingerprint, "-listen", addr)
	logFile, _ := os.Create(filepath.Join(dir, "litewitness.log"))
	lw.Stdout, lw.Stderr = logFile, logFile
	if err := lw.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lw.Process.Kill()
		lw.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("litewitness's log:\n%s", b)
		}
	})
	waitUntil(t, "litewitness to serve", func() bool {
		r, err := http.Get("http://" + addr + "/")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})
	empty := sha256.Sum256(nil)
	var sql strings.Builder
	for origin, vkey := range logs {
		fmt.Fprintf(&sql, "INSERT INTO log (origin, tree_size, tree_hash) VALUES ('%s', 0, '%s'); INSERT INTO key (origin, key) VALUES ('%s', '%s');",
			origin, base64.StdEncoding.EncodeToString(empty[:]), origin, vkey)
	}
	if out, err := exec.Command(sqlite, db, sql.String()).CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v %s", err, out)
	}
	return addr, pub
}

// waitUntil polls ok, what a step of the test's own made, for up to 10 s.
func waitUntil(t testing.TB, what string, ok func() bool) {
	t.Helper()
	for range 200 {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}
