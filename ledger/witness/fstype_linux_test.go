package witness

import (
	"strings"
	"testing"
)

// A state on a file system other machines mount is refused by its type; a local one is not.
func TestSharedFileSystems(t *testing.T) {
	for magic, want := range map[int64]string{0x6969: "NFS", 0xFF534D42: "SMB/CIFS", 0xFE534D42: "SMB/CIFS", 0x00c36400: "Ceph", 0x01021997: "9p", 0x65735546: "FUSE", 0x0bd00bd0: "Lustre", 0xEF53: "", 0x01021994: "", 0x58465342: ""} {
		if got := sharedFSName(magic); !strings.HasPrefix(got, want) || (want == "") != (got == "") {
			t.Errorf("%#x: %q; want %q", magic, got, want)
		}
	}
	if fs, err := sharedFS(t.TempDir()); fs != "" || err != nil {
		t.Errorf("the test's own directory: %q %v", fs, err)
	}
}
