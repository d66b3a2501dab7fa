package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/ledger"
	"github.com/sealrun/sealrun/ledger/witness"
)

// The witness verbs as an operator meets them: keygen (never over an existing key), key, serve's
// refusals of bad input, each naming the flag or the line.
func TestWitnessVerbs(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "key")
	r := sealrun(t, "witness", "keygen", "--name", "witness.test/w1", "--out", key)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "witness.test/w1+") {
		t.Fatalf("keygen: %+v", r)
	}
	vkey := strings.TrimSpace(r.stdout)
	if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	logs := filepath.Join(dir, "logs")
	os.WriteFile(logs, []byte("# hosts\n\nnot-a-key\n"), 0o644)
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"bare", []string{"witness"}, 2, "", "missing subcommand"},
		{"keygen over a key", []string{"witness", "keygen", "--name", "w.test/x", "--out", key}, 2, "", "is never overwritten"},
		{"keygen bad name", []string{"witness", "keygen", "--name", "has space", "--out", filepath.Join(dir, "k2")}, 2, "", "not a key name"},
		{"key", []string{"witness", "key", key}, 0, vkey, ""},
		{"key of a non-key", []string{"witness", "key", logs}, 1, "", "not a witness private key"},
		{"serve without logs", []string{"witness", "serve", "--key", key, "--state", dir}, 2, "", "--log"},
		{"serve without key", []string{"witness", "serve", "--state", dir, "--log", vkey}, 2, "", "--key"},
		{"serve a witness key as a log", []string{"witness", "serve", "--key", key, "--state", dir, "--log", vkey}, 2, "", "--log: log key"},
		{"serve a bad logs file", []string{"witness", "serve", "--key", key, "--state", dir, "--logs", logs}, 2, "", logs + ":3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := sealrun(t, c.args...)
			if r.code != c.code || !strings.Contains(r.stdout, c.stdout) || !strings.Contains(r.stderr, c.stderr) {
				t.Errorf("exit %d\nstdout %q\nstderr %q\nwant %d, %q, %q", r.code, r.stdout, r.stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
}

// startWitness starts sealrun witness serve and returns its URL and process.
func startWitness(t *testing.T, key, state, logKey string) (string, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(bin, "witness", "serve", "--key", key, "--state", state, "--log", logKey, "--listen", "127.0.0.1:0", "--rate", "100000")
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = nil
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("witness serve said %q: %v", line, err)
	}
	_, rest, _ := strings.Cut(line, " on ")
	url, _, _ := strings.Cut(rest, " ")
	return url, cmd
}

// kill -9 of the witness at any moment loses no cosigned size: after every restart it holds at
// least the largest size it answered 200 for, and a log that resends from the size a 409 names
// goes on. The log is a real ledger signed with a host key, its heads taken from its export.
func TestWitnessSurvivesKill9(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "witness.key")
	if r := sealrun(t, "witness", "keygen", "--name", "witness.test/w1", "--out", key); r.code != 0 {
		t.Fatal(r)
	}
	wv, err := witness.NewVerifier(strings.TrimSpace(sealrun(t, "witness", "key", key).stdout))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := attest.LoadSigner(context.Background(), "../../attest/testdata/ed25519.key", nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ledger.jsonl")
	lg, err := ledger.Open(path, "sealrun.ledger/kill9-host", signer)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	tree := ledger.NewTree()
	add := func(n int) string { // append n runs, return the signed head over them
		for range n {
			e := &ledger.Entry{Kind: ledger.KindQueued, Run: fmt.Sprintf("r-%d", tree.Size()), Time: time.Now(), Track: strings.Repeat("ab", 32), Scaffold: "s 1", Agent: "none/none", Seed: 1}
			if _, err := lg.Append(e); err != nil {
				t.Fatal(err)
			}
			leaf, _ := e.Encode()
			tree.Append(ledger.LeafHash(leaf))
		}
		root, _ := tree.Root(tree.Size())
		signed, err := ledger.SignCheckpoint(ledger.Checkpoint{Origin: "sealrun.ledger/kill9-host", Size: tree.Size(), Root: root}, signer)
		if err != nil {
			t.Fatal(err)
		}
		return signed
	}
	exported := filepath.Join(dir, "export.jsonl")
	add(1)
	sealrun(t, "--state-dir", dir, "ledger", "export", "--out", exported)
	vk := sealrun(t, "ledger", "vkey", exported, "--key", "../../attest/testdata/ed25519.pub")
	if vk.code != 0 {
		t.Fatalf("ledger vkey: %+v", vk)
	}
	logKey := strings.TrimSpace(vk.stdout)
	state := filepath.Join(dir, "witness-state")
	hc := &http.Client{Timeout: 5 * time.Second}
	var acked, held uint64
	for round := range 8 {
		url, cmd := startWitness(t, key, state, logKey)
		killAt := time.Duration(rand.IntN(40)) * time.Millisecond
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				signed := add(1 + rand.IntN(3))
				p := [][]byte(nil)
				if held > 0 {
					if p, err = tree.ConsistencyProof(held, tree.Size()); err != nil {
						t.Error(err)
						return
					}
				}
				_, err := witness.Submit(context.Background(), hc, url, wv, held, p, signed)
				if ce, ok := err.(*witness.ConflictError); ok {
					held = ce.Size
					continue
				}
				if err != nil {
					return // killed
				}
				held = tree.Size()
				acked = held
			}
		}()
		time.Sleep(killAt)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		<-done
		// Restarted, it holds at least what it acknowledged: a request from 0 is told so.
		url, cmd = startWitness(t, key, state, logKey)
		_, err := witness.Submit(context.Background(), hc, url, wv, 0, nil, add(1))
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		ce, ok := err.(*witness.ConflictError)
		if acked == 0 && err == nil {
			held = tree.Size()
			acked = held
			continue
		}
		if !ok || ce.Size < acked {
			t.Fatalf("round %d: acknowledged size %d, after kill -9 the witness answers %v", round, acked, err)
		}
		held = ce.Size
	}
	if acked == 0 {
		t.Fatal("no head was ever cosigned")
	}
	t.Logf("8 kill -9 rounds: the witness holds %d (acknowledged %d) of %d entries", held, acked, tree.Size())
}
