package grader

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/report"
)

func cand(hexPrefix string) string {
	return "sha256:" + hexPrefix + strings.Repeat("0", 64-len(hexPrefix))
}

func TestHistoryChainAndReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	h, err := OpenHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	passed, score := 3, 75.0
	for _, e := range []HistoryEntry{
		{Kind: KindSubmit, Time: t0, Candidate: cand("c3f1aa"), Size: 100, Files: 2},
		{Kind: KindValidation, Time: t0.Add(time.Second), Candidate: cand("c3f1aa"), Passed: &passed, Questions: 4, Score: &score},
		{Kind: KindRefused, Time: t0.Add(2 * time.Second), Dir: "/workspace/x", Reason: "bundle: has no sealrun-bundle.json"},
		{Kind: KindSubmit, Time: t0.Add(3 * time.Second), Candidate: cand("c3f2bb"), Size: 200},
	} {
		if err := h.Append(e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Promote("c3f", t0); err == nil || !strings.Contains(err.Error(), "at least 4 hex digits") {
		t.Errorf("short prefix: %v", err)
	}
	if _, err := h.Promote("c3f1", t0.Add(4*time.Second)); err != nil {
		t.Fatal(err)
	}
	head, n := h.Head()
	h.Close()

	// The chain recomputes with the audit package and by hand.
	f, _ := os.Open(path)
	got, m, err := audit.Head(f)
	f.Close()
	if err != nil || got != head || m != n || n != 5 {
		t.Fatalf("head %s/%d vs %s/%d (%v)", got, m, head, n, err)
	}
	data, _ := os.ReadFile(path)
	prev := strings.Repeat("0", 64)
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		sum := sha256.Sum256([]byte(prev + "\n" + line))
		prev = hex.EncodeToString(sum[:])
		if strings.Count(line, `"kind"`) != 1 {
			t.Errorf("line repeats or lacks kind: %s", line)
		}
	}
	if prev != head {
		t.Errorf("by hand %s, recorded %s", prev, head)
	}

	// Replay gives back the same state.
	h2, err := OpenHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	cs := h2.Candidates()
	if len(cs) != 2 || h2.Promoted() != cand("c3f1aa") || !cs[0].Promoted || cs[0].Passed != 3 || cs[0].Score != 75 || !cs[0].Validated || cs[1].Validated {
		t.Fatalf("replayed %+v promoted %s", cs, h2.Promoted())
	}
	table := h2.Table(t0)
	for _, want := range []string{"c3f1aa000000   +0m00s", "3/4 (75.0%)", "yes (graded)", "c3f2bb000000   +0m03s", "history: 5 entries"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}

	// A cut last line (a crash mid-write) is refused, never repaired.
	os.WriteFile(path, append(data, []byte(`{"seq":6,"kind":"prom`)...), 0o600)
	if _, err := OpenHistory(path); err == nil || !strings.Contains(err.Error(), "does not end with a newline") {
		t.Errorf("truncated history: %v", err)
	}
}

func TestHistoryResolve(t *testing.T) {
	h, err := OpenHistory(filepath.Join(t.TempDir(), "h.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Resolve("abcd"); err == nil || !strings.Contains(err.Error(), "nothing has been submitted yet") {
		t.Errorf("empty: %v", err)
	}
	for _, c := range []string{"abcd1111", "abcd2222", "ef001111"} {
		h.Append(HistoryEntry{Kind: KindSubmit, Time: time.Now(), Candidate: cand(c), Size: 1})
	}
	cases := map[string]string{
		"abcd":           "is ambiguous: it could be abcd11110000… or abcd22220000…",
		"9999":           "no candidate 9999; the candidates are abcd11110000, abcd22220000, ef0011110000",
		"xyz!":           "is not a candidate id",
		"sha256:ef00":    "",
		"ABCD2":          "",
		"  ef001111  ":   "",
		"ef001111000000": "",
	}
	for in, want := range cases {
		id, err := h.Resolve(in)
		switch {
		case want == "" && (err != nil || !strings.HasPrefix(id, "sha256:")):
			t.Errorf("%q: %v %q", in, err, id)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: got %v; want %q", in, err, want)
		}
	}
}

// Concurrent promotes and one finalize: every acknowledged promotion before the finalize is in
// the history, nothing after it is, and the graded candidate is the last promoted before it.
func TestPromoteFinalizeRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	h, err := OpenHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"aaaa", "bbbb", "cccc", "dddd"}
	for _, c := range ids {
		h.Append(HistoryEntry{Kind: KindSubmit, Time: time.Now(), Candidate: cand(c), Size: 1})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	okAfter := 0
	finalized := make(chan struct{})
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Only a promote that starts after finalize has returned must be refused: one that
			// started before may take the lock first and succeed, then return after the close.
			after := false
			select {
			case <-finalized:
				after = true
			default:
			}
			_, err := h.Promote(ids[i%4], time.Now())
			if after && err == nil {
				mu.Lock()
				okAfter++
				mu.Unlock()
			}
		}()
		if i == 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := h.Finalize("", time.Now()); err != nil {
					t.Error(err)
				}
				close(finalized)
			}()
		}
	}
	wg.Wait()
	if okAfter > 0 {
		t.Errorf("%d promotions that started after finalize returned succeeded", okAfter)
	}
	if _, err := h.Promote("aaaa", time.Now()); err == nil || !strings.Contains(err.Error(), "finalized") {
		t.Errorf("promote after finalize: %v", err)
	}
	if _, err := h.Finalize("aaaa", time.Now()); err == nil || !strings.Contains(err.Error(), "already finalized") {
		t.Errorf("second finalize: %v", err)
	}
	promoted := h.Promoted()
	h.Close()
	// The last promote before the finalize entry is the graded one, and replay agrees.
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	last := ""
	for _, l := range lines {
		if strings.Contains(l, `"kind":"finalize"`) {
			break
		}
		if i := strings.Index(l, `"candidate":"`); i >= 0 && strings.Contains(l, `"kind":"promote"`) {
			last = l[i+13 : i+13+71]
		}
	}
	if !strings.Contains(lines[len(lines)-1], `"kind":"finalize"`) || last != promoted {
		t.Errorf("finalize is not last or graded %s != last promoted %s", promoted, last)
	}
	h2, err := OpenHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	if h2.Promoted() != promoted || !h2.Finalized() {
		t.Errorf("replay: %s finalized=%v", h2.Promoted(), h2.Finalized())
	}
}

// The pass vector hash is recomputed independently, as PREDICATE.md documents it.
func TestPassVectorHashIndependent(t *testing.T) {
	v := report.PassVector("0110100001")
	if v.Passed() != 4 {
		t.Errorf("passed %d", v.Passed())
	}
	sum := sha256.Sum256([]byte("0110100001"))
	if string(v.SHA256()) != hex.EncodeToString(sum[:]) {
		t.Errorf("hash differs from sha256 of the ASCII bytes")
	}
	if _, err := exec.LookPath("sha256sum"); err == nil {
		out, err := exec.Command("sh", "-c", "printf %s 0110100001 | sha256sum").Output()
		if err != nil || !strings.HasPrefix(string(out), string(v.SHA256())) {
			t.Errorf("sha256sum says %s (%v), we say %s", out, err, v.SHA256())
		}
	}
}
