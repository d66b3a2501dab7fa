package witness

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"fmt"
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

// sealrun's cosignatures and torchwood's are the same thing: torchwood's verifier accepts ours
// (and computes the same vkey and time), ours accepts torchwood's.
func TestCosignaturesAgreeWithTorchwood(t *testing.T) {
	tw := testenv.Torchwood(t)
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
	lg := newTestLog(t, "sealrun.ledger/lite", false)
	name := "witness.test/litewitness"
	addr, pub := testenv.Litewitness(t, name, map[string]string{lg.origin: lg.vkey})
	v, err := NewVerifier(VKey(name, pub))
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr
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

var _ note.Verifier = (*Verifier)(nil)
