package witness

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/ledger"
	"golang.org/x/mod/sumdb/note"
)

// torchwood is filippo.io/torchwood v0.6.1, from the Go module proxy: its litewitness, and
// twcheck, a few lines of ours over its cosignature signer and verifier.
func torchwood(t *testing.T) map[string]string {
	t.Helper()
	return testenv.GoTools(t, "torchwood-v0.6.1", map[string]string{
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

// sealrun's cosignatures and torchwood's are the same thing: torchwood's verifier accepts ours
// (and computes the same vkey and time), ours accepts torchwood's.
func TestCosignaturesAgreeWithTorchwood(t *testing.T) {
	tw := torchwood(t)
	dir := t.TempDir()
	seed := make([]byte, 32)
	copy(seed, "sealrun interop test seed 012345")
	priv := ed25519.NewKeyFromSeed(seed)
	skey := fmt.Sprintf("PRIVATE+KEY+witness.test/agree+%08x+%s", keyID("witness.test/agree", algCosignature, priv.Public().(ed25519.PublicKey)), base64.StdEncoding.EncodeToString(append([]byte{algCosignature}, seed...)))
	c, err := NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	lg := newTestLog(t, "sealrun.ledger/interop", false)
	lg.grow(11)
	signed := lg.head(t)
	body, _, _ := strings.Cut(signed, "\n\n")
	body += "\n"
	at := time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC)
	cosigned := body + "\n" + c.Cosign([]byte(body), at)
	os.WriteFile(filepath.Join(dir, "cosigned"), []byte(cosigned), 0o644)
	out, err := exec.Command(tw["twcheck"], "verify", "witness.test/agree", hex.EncodeToString(seed), filepath.Join(dir, "cosigned")).CombinedOutput()
	if err != nil {
		t.Fatalf("torchwood refuses sealrun's cosignature: %v %s", err, out)
	}
	if want := fmt.Sprintf("%s %d <nil>\n", c.VerifierKey(), at.Unix()); string(out) != want {
		t.Fatalf("torchwood says %q, want %q", out, want)
	}
	os.WriteFile(filepath.Join(dir, "body"), []byte(body), 0o644)
	line, err := exec.Command(tw["twcheck"], "sign", "witness.test/agree", hex.EncodeToString(seed), filepath.Join(dir, "body")).Output()
	if err != nil {
		t.Fatal(err)
	}
	v, _ := NewVerifier(c.VerifierKey())
	if _, err := Pick(signed, string(line), v); err != nil {
		t.Fatalf("sealrun refuses torchwood's cosignature %q: %v", line, err)
	}
}

// litewitness (torchwood's witness, nobody here wrote it) follows a sealrun ledger: its key in an
// ssh-agent as it expects, the log added to its SQLite database as witnessctl would (with
// Debian's sqlite3), and sealrun's Submit gets its cosignatures over real heads, resends from the
// size its 409 names, and is refused a split view.
func TestLitewitnessCosignsOurHeads(t *testing.T) {
	tw := torchwood(t)
	agentBin := testenv.RequireTool(t, "ssh-agent", "openssh-client")
	addBin := testenv.RequireTool(t, "ssh-add", "openssh-client")
	keygen := testenv.RequireTool(t, "ssh-keygen", "openssh-client")
	sqlite := testenv.RequireTool(t, "sqlite3", "sqlite3")
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
	waitFor(t, func() bool { _, err := os.Stat(sock); return err == nil })
	add := exec.Command(addBin, keyFile)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("ssh-add: %v %s", err, out)
	}
	// The witness's vkey, from its ssh public key: name+id+base64(0x04 || key).
	pubLine, _ := os.ReadFile(keyFile + ".pub")
	blob, _ := base64.StdEncoding.DecodeString(strings.Fields(string(pubLine))[1])
	pub := blob[len(blob)-ed25519.PublicKeySize:]
	name := "witness.test/litewitness"
	v, err := NewVerifier(fmt.Sprintf("%s+%08x+%s", name, keyID(name, algCosignature, pub), base64.StdEncoding.EncodeToString(append([]byte{algCosignature}, pub...))))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
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
	url := "http://" + addr
	waitFor(t, func() bool {
		r, err := http.Get(url + "/")
		if err == nil {
			r.Body.Close()
		}
		return err == nil
	})
	lg := newTestLog(t, "sealrun.ledger/lite", false)
	empty := ledger.Hash(emptyRoot)
	sql := fmt.Sprintf("INSERT INTO log (origin, tree_size, tree_hash) VALUES ('%s', 0, '%s'); INSERT INTO key (origin, key) VALUES ('%s', '%s');",
		lg.origin, base64.StdEncoding.EncodeToString(empty[:]), lg.origin, lg.vkey)
	if out, err := exec.Command(sqlite, db, sql).CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v %s", err, out)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	ctx := t.Context()
	lg.grow(4)
	first := lg.head(t)
	line, err := Submit(ctx, hc, url, v, 0, nil, first)
	if err != nil {
		t.Fatalf("litewitness, first head: %v", err)
	}
	checkTime(t, line)
	lg.grow(6)
	if _, err := Submit(ctx, hc, url, v, 4, lg.proof(t, 4), lg.head(t)); err != nil {
		t.Fatalf("litewitness, from 4 to 10: %v", err)
	}
	lg.grow(1)
	_, err = Submit(ctx, hc, url, v, 4, lg.proof(t, 4), lg.head(t))
	ce, ok := err.(*ConflictError)
	if !ok || ce.Size != 10 {
		t.Fatalf("litewitness, a stale old size: %v; want a 409 naming 10", err)
	}
	if _, err := Submit(ctx, hc, url, v, ce.Size, lg.proof(t, ce.Size), lg.head(t)); err != nil {
		t.Fatalf("litewitness, resent from the size it named: %v", err)
	}
	split := &testLog{origin: lg.origin, signer: lg.signer, tree: ledger.NewTree(), vkey: lg.vkey}
	split.grow(14)
	_, err = Submit(ctx, hc, url, v, 11, split.proof(t, 11), split.head(t))
	if se, ok := err.(*StatusError); !ok || se.Status != http.StatusUnprocessableEntity {
		t.Fatalf("litewitness, a second tree under the same key: %v; want 422", err)
	}
}

// checkTime reads a cosignature's time: within a minute of now.
func checkTime(t *testing.T, line string) {
	t.Helper()
	ts, err := CosignatureTime(line)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(ts); d < -time.Minute || d > time.Minute {
		t.Errorf("cosignature time %s", ts)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for i := 0; i < 200; i++ {
		if ok() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("timed out waiting")
}

var _ note.Verifier = (*Verifier)(nil)
