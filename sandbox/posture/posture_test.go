package posture

import "testing"

// /proc/PID/status as the kernel writes it: tab-separated, values with runs of blanks.
func TestStatusFields(t *testing.T) {
	f := StatusFields("Name:\tsh\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t1\nnot a field\n")
	for k, want := range map[string]string{"Name": "sh", "Uid": "1000 1000 1000 1000", "CapEff": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2", "Seccomp_filters": "1"} {
		if f[k] != want {
			t.Errorf("%s = %q; want %q", k, f[k], want)
		}
	}
	if len(f) != 6 {
		t.Errorf("%d fields, want 6: %v", len(f), f)
	}
}
