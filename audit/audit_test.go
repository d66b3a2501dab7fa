package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestAppendChainsAndRecomputes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, _, err := l.Append("call", map[string]any{"argv": []string{"echo", strings.Repeat("x", i)}}); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	head, n := l.Head()
	l.Close()
	data, _ := os.ReadFile(p)
	// An independent recomputation, straight from the documented rule.
	want := strings.Repeat("0", 64)
	lines := bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
	for i, line := range lines {
		var e struct {
			Seq  int    `json:"seq"`
			Prev string `json:"prev"`
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(line, &e); err != nil || e.Seq != i+1 || e.Prev != want || e.Kind != "call" {
			t.Fatalf("line %d: %s (%v)", i+1, line, err)
		}
		sum := sha256.Sum256(append([]byte(want+"\n"), line...))
		want = hex.EncodeToString(sum[:])
	}
	if head != want || n != 50 || len(lines) != 50 {
		t.Errorf("head %s n %d; recomputed %s over %d lines", head, n, want, len(lines))
	}
	// Reopening continues the chain.
	l2, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if h, n := l2.Head(); h != head || n != 50 {
		t.Errorf("reopened: %s %d", h, n)
	}
	if seq, _, err := l2.Append("submit", struct{}{}); err != nil || seq != 51 {
		t.Errorf("append after reopen: %d %v", seq, err)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(filepath.Join(dir, "a.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for name, body := range map[string]any{"not an object": []int{1}, "too big": map[string]string{"x": strings.Repeat("y", MaxLineBytes)}} {
		if _, _, err := l.Append("call", body); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
	if _, n := l.Head(); n != 0 {
		t.Errorf("a refused entry was counted")
	}
	// A log cut by a crash mid-line is refused, naming the line.
	cut := filepath.Join(dir, "cut.jsonl")
	os.WriteFile(cut, []byte(`{"seq":1}`+"\n"+`{"seq":2,"ar`), 0o600)
	if _, err := Open(cut); err == nil || !strings.Contains(err.Error(), "line 2 does not end with a newline") {
		t.Errorf("cut log: %v", err)
	}
	os.WriteFile(cut, []byte("not json\n"), 0o600)
	if _, err := Open(cut); err == nil || !strings.Contains(err.Error(), "line 1 is not a JSON entry") {
		t.Errorf("garbage log: %v", err)
	}
}
