package daemon

import (
	"fmt"
	"strings"
	"testing"
)

// One account holds at most MaxAttachesPerUser attach slots, so it cannot take every one of
// the daemon's MaxAttaches and lock every person out; the daemon's own bound still holds.
func TestAttachSlotsPerAccount(t *testing.T) {
	var s sessions
	for i := range MaxAttachesPerUser {
		if err := s.acquire("alice"); err != nil {
			t.Fatalf("alice's attach %d: %v", i+1, err)
		}
	}
	if err := s.acquire("alice"); err == nil || !strings.Contains(err.Error(), "alice holds 8 attaches already") {
		t.Errorf("alice past her slots: %v", err)
	}
	if err := s.acquire("bob"); err != nil {
		t.Errorf("bob, with alice at her bound: %v", err)
	}
	s.release("alice")
	if err := s.acquire("alice"); err != nil {
		t.Errorf("alice after detaching one: %v", err)
	}
	// Many accounts together still meet the daemon's bound.
	n := MaxAttachesPerUser + 1
	for i := 0; n < MaxAttaches; i++ {
		if err := s.acquire(fmt.Sprintf("u%d", i)); err != nil {
			t.Fatalf("account u%d: %v", i, err)
		}
		n++
	}
	if err := s.acquire("carol"); err == nil || !strings.Contains(err.Error(), "serves 64 attaches at once") {
		t.Errorf("past the daemon's bound: %v", err)
	}
	// 1,000 attaches and detaches in a loop leave the slots as they were.
	s.release("bob")
	for range 1000 {
		if err := s.acquire("bob"); err != nil {
			t.Fatal(err)
		}
		s.release("bob")
	}
	if s.attaches != MaxAttaches-1 || s.byUser["bob"] != 0 {
		t.Errorf("after the loop: %d attaches, bob %d", s.attaches, s.byUser["bob"])
	}
}
