package demo

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
)

// The demo shows its ledger to a witness, as an operator shows theirs to a lab's: sealrun's own
// witness (sealrun witness serve), in this process on loopback, with a key of its own, following
// the demo's ledger by its key. Its public key is witness/witness.pub beside the demo's keys.

// demoOrigin is the origin of the demo's ledger: the existing ledger's (an origin is fixed when
// a ledger is made), else one named after the state directory.
func demoOrigin(state string) string {
	if f, err := os.Open(filepath.Join(state, "ledger.jsonl")); err == nil {
		defer f.Close()
		if c, err := ledger.Export(f, io.Discard); err == nil {
			return c.Origin
		}
	}
	sum := sha256.Sum256([]byte(state))
	return "sealrun.ledger/demo-" + hex.EncodeToString(sum[:4])
}

// startWitness starts the demo's witness for origin's ledger signed with the demo's key and
// returns its public key and URL; it stops when the demo ends.
func (s *session) startWitness(origin string) (vkey, url string, err error) {
	dir := filepath.Join(s.demoDir, "witness")
	if err := os.RemoveAll(dir); err != nil { // a new key each demo, as the signing keys are
		return "", "", err
	}
	// A name of its own each demo (its key is new each demo too): cosignatures a demo before kept
	// in the state directory are another witness's.
	s.witnessName = fmt.Sprintf("witness.demo.sealrun/%s-%d", filepath.Base(s.demoDir), time.Now().Unix())
	skey, vkey, err := witness.GenerateKey(s.witnessName)
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	if err := fileio.WriteFile(filepath.Join(dir, "witness.key"), []byte(skey+"\n"), 0o600); err != nil {
		return "", "", err
	}
	if err := fileio.WriteFile(filepath.Join(dir, "witness.pub"), []byte(vkey+"\n"), 0o644); err != nil {
		return "", "", err
	}
	c, err := witness.NewCosigner(skey)
	if err != nil {
		return "", "", err
	}
	_, pub, err := attest.LoadVerifier(filepath.Join(s.keys, "sealrun.pub"))
	if err != nil {
		return "", "", err
	}
	st, err := witness.OpenStore(dir)
	if err != nil {
		return "", "", err
	}
	srv, err := witness.ServerFor(c, origin, pub, st)
	if err != nil {
		st.Close()
		return "", "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return "", "", err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(ln)
	s.onClose(func() { hs.Close(); st.Close() })
	s.witnessPub = filepath.Join(dir, "witness.pub")
	return vkey, "http://" + ln.Addr().String(), nil
}

// exportWitnessed writes the demo's ledger for publication with the head its witness cosigned,
// waiting (up to a minute) for it to cosign the last one.
func exportWitnessed(ctx context.Context, state, out, name string) (string, error) {
	path := filepath.Join(state, "ledger.jsonl")
	deadline := time.Now().Add(time.Minute)
	for {
		lf, err := os.Open(path)
		if err != nil {
			return "", err
		}
		head, err := ledger.Export(lf, io.Discard)
		lf.Close()
		if err != nil {
			return "", err
		}
		cs, err := witness.ReadCosignatures(filepath.Join(state, witness.CosignaturesFile))
		if err != nil {
			return "", err
		}
		lf, err = os.Open(path)
		if err != nil {
			return "", err
		}
		ofThisLedger, err := ledger.HeadOf(lf)
		lf.Close()
		if err != nil {
			return "", err
		}
		signed, size, by, ok := cs.Best([]string{name}, 1, ofThisLedger)
		if ok && size == head.Size || time.Now().After(deadline) {
			if !ok {
				return "", errors.New("the demo's witness cosigned no head of the ledger (its errors are in sealrund.log)")
			}
			lf, err := os.Open(path)
			if err != nil {
				return "", err
			}
			defer lf.Close()
			err = fileio.WriteAtomic(out, 0o644, func(w io.Writer) error { _, err := ledger.ExportWitnessed(lf, w, signed); return err })
			return fmt.Sprintf("head of %d of %d entries cosigned by %s", size, head.Size, by[0]), err
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
