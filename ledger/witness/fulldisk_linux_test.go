package witness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sealrun/sealrun/internal/testenv"
)

// A full disk takes part of a head record: the store cuts it back, so that the next record (once
// there is room) does not follow part of one. Before, the part stayed mid-file and the next
// start refused the store as a file someone edited ("restore it from a backup").
func TestStoreOnAFullDisk(t *testing.T) {
	dir := testenv.SmallDisk(t, 16<<10)
	spare := filepath.Join(dir, "spare")
	if err := os.WriteFile(spare, make([]byte, 8<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if st != nil {
			st.Close()
		}
	}()
	// Records of about 250 bytes, which do not divide a page: one is cut by the full disk.
	origin := func(i int) string { return fmt.Sprintf("sealrun.ledger/%03d-%s", i, strings.Repeat("h", 180)) }
	heads := map[string]Head{}
	var full error
	for i := 0; i < 1000 && full == nil; i++ {
		h := Head{Size: uint64(i + 1)}
		h.Root[0] = byte(i)
		if full = st.Update(origin(i), func(Head) (Head, error) { return h, nil }); full == nil {
			heads[origin(i)] = h
		}
	}
	if !errors.Is(full, unix.ENOSPC) || !strings.Contains(full.Error(), StateFile) {
		t.Fatalf("%v; want the full disk, naming the state file", full)
	}
	os.Remove(spare)
	last := Head{Size: 7}
	if err := st.Update("sealrun.ledger/after", func(Head) (Head, error) { return last, nil }); err != nil {
		t.Fatalf("an update once there is room: %v", err)
	}
	heads["sealrun.ledger/after"] = last
	st.Close()
	if st, err = OpenStore(dir); err != nil {
		t.Fatalf("the store does not open after the full disk: %v", err)
	}
	for o, h := range heads {
		if got := st.Head(o); got != h {
			t.Errorf("%s: %+v after reopening; want %+v", o[:20], got, h)
		}
	}
}
