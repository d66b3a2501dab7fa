// Package mountinfo reads the kernel's mount table (proc_pid_mountinfo(5)) as sandbox and its
// cgroup package need it: each mount's id, where it is mounted and its filesystem type.
package mountinfo

import (
	"os"
	"strconv"
	"strings"
)

// Entry is one line of mountinfo: the mount's id, where it is mounted and its filesystem
// type.
type Entry struct {
	ID          int
	Point, Type string
}

// Table reads the calling thread's mountinfo (a thread may have a mount namespace of its own:
// sandbox's removeHidden does).
func Table() []Entry {
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil
	}
	var out []Entry
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, t := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(t) < 1 {
			continue
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		out = append(out, Entry{ID: id, Point: Unescape(f[4]), Type: t[0]})
	}
	return out
}

// Unescape undoes mountinfo's octal escapes (\040 for a space, …).
func Unescape(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
