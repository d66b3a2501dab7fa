package grader

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const manifestJSON = `{"protocol": "sealrun-bundle/v1", "entrypoint": ["python3", "predict.py"]}`

// bundleDir writes a small bundle into ws/rel and returns rel.
func bundleDir(t *testing.T, ws, rel string, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(ws, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, ok := files[ManifestName]; !ok {
		files[ManifestName] = manifestJSON
	}
	if _, ok := files["predict.py"]; !ok {
		files["predict.py"] = "print('hi')\n"
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return rel
}

func listTar(t *testing.T, file string) []string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var out []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) || h.Uname != "" {
			t.Errorf("%s: owner %d:%d %q mtime %v; want 0:0, epoch", h.Name, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
		out = append(out, h.Name)
	}
}

func TestPackDeterministic(t *testing.T) {
	ctx := context.Background()
	files := map[string]string{"weights/b.bin": "bbbb", "weights/a.bin": "aaaa", "z.txt": "z"}
	ws1, ws2 := t.TempDir(), t.TempDir()
	bundleDir(t, ws1, "bundle", files)
	bundleDir(t, ws2, "other/place", files)
	// Different times, modes (non-exec) and creation order must not change the id.
	os.Chtimes(filepath.Join(ws2, "other/place/z.txt"), time.Unix(1e9, 0), time.Unix(1e9, 0))
	os.Chmod(filepath.Join(ws2, "other/place/z.txt"), 0o600)
	c1, err := Pack(ctx, ws1, "bundle", filepath.Join(t.TempDir(), "c"), DefaultLimits(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	c2, err := Pack(ctx, ws2, "./other/place", filepath.Join(t.TempDir(), "c"), DefaultLimits(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	if c1.ID != c2.ID || c1.Size != c2.Size || c1.Files != 5 || c1.RawBytes != c2.RawBytes {
		t.Fatalf("same files, different candidates: %+v %+v", c1, c2)
	}
	if filepath.Base(c1.Path) != c1.ID+".tar.gz" {
		t.Errorf("stored as %s", c1.Path)
	}
	st, _ := os.Stat(c1.Path)
	if st.Size() != c1.Size {
		t.Errorf("size %d recorded, %d on disk", c1.Size, st.Size())
	}
	got := strings.Join(listTar(t, c1.Path), " ")
	if want := "predict.py sealrun-bundle.json weights/ weights/a.bin weights/b.bin z.txt"; got != want {
		t.Errorf("entries %q; want %q", got, want)
	}
	// An executable bit is kept (as 0755); contents change the id.
	os.Chmod(filepath.Join(ws2, "other/place/z.txt"), 0o700)
	c3, _ := Pack(ctx, ws2, "other/place", filepath.Join(t.TempDir(), "c"), DefaultLimits(16<<20))
	if c3 == nil || c3.ID == c1.ID {
		t.Errorf("exec bit did not change the candidate")
	}
}

func TestPackRefuses(t *testing.T) {
	ctx := context.Background()
	lim := DefaultLimits(16 << 20)
	cases := []struct {
		name  string
		setup func(t *testing.T, ws string) string // returns rel
		lim   Limits
		want  string
	}{
		{"dir is a symlink to /etc", func(t *testing.T, ws string) string {
			os.Symlink("/etc", filepath.Join(ws, "bundle"))
			return "bundle"
		}, lim, "bundle: is a symlink"},
		{"parent is a symlink", func(t *testing.T, ws string) string {
			os.Symlink("/", filepath.Join(ws, "up"))
			return "up/etc"
		}, lim, "up: is a symlink"},
		{"dot dot", func(t *testing.T, ws string) string { return "../" + filepath.Base(ws) }, lim, "not inside the workspace"},
		{"missing", func(t *testing.T, ws string) string { return "nope" }, lim, "nope: does not exist"},
		{"a file", func(t *testing.T, ws string) string {
			os.WriteFile(filepath.Join(ws, "f"), nil, 0o644)
			return "f"
		}, lim, "f: is not a directory"},
		{"symlink inside", func(t *testing.T, ws string) string {
			rel := bundleDir(t, ws, "b", map[string]string{})
			os.Symlink("/etc/shadow", filepath.Join(ws, rel, "weights.bin"))
			return rel
		}, lim, "weights.bin: is a symlink"},
		{"relative symlink inside", func(t *testing.T, ws string) string {
			rel := bundleDir(t, ws, "b", map[string]string{})
			os.Symlink("predict.py", filepath.Join(ws, rel, "again.py"))
			return rel
		}, lim, "again.py: is a symlink"},
		{"hard link", func(t *testing.T, ws string) string {
			rel := bundleDir(t, ws, "b", map[string]string{})
			os.WriteFile(filepath.Join(ws, "outside"), []byte("secret"), 0o600)
			os.Link(filepath.Join(ws, "outside"), filepath.Join(ws, rel, "w.bin"))
			return rel
		}, lim, "w.bin: is a hard link"},
		{"fifo", func(t *testing.T, ws string) string {
			rel := bundleDir(t, ws, "b", map[string]string{})
			syscall.Mkfifo(filepath.Join(ws, rel, "pipe"), 0o644)
			return rel
		}, lim, "pipe: is a FIFO"},
		{"socket", func(t *testing.T, ws string) string {
			rel := bundleDir(t, ws, "b", map[string]string{})
			fd, _ := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			syscall.Bind(fd, &syscall.SockaddrUnix{Name: filepath.Join(ws, rel, "sock")})
			syscall.Close(fd)
			return rel
		}, lim, "sock: is a socket"},
		{"sparse terabyte", func(t *testing.T, ws string) string {
			rel := bundleDir(t, ws, "b", map[string]string{})
			f, _ := os.Create(filepath.Join(ws, rel, "huge.bin"))
			f.Truncate(1 << 40)
			f.Close()
			return rel
		}, lim, "huge.bin: is 1099511627776 bytes; the bundle may hold at most 1073741824 bytes"},
		{"no manifest", func(t *testing.T, ws string) string {
			os.MkdirAll(filepath.Join(ws, "b"), 0o755)
			os.WriteFile(filepath.Join(ws, "b", "x"), nil, 0o644)
			return "b"
		}, lim, "has no sealrun-bundle.json"},
		{"too many files", func(t *testing.T, ws string) string {
			rel := bundleDir(t, ws, "b", map[string]string{})
			for i := range 20 {
				os.WriteFile(filepath.Join(ws, rel, strings.Repeat("f", i+1)), nil, 0o644)
			}
			return rel
		}, Limits{MaxGzipBytes: 16 << 20, MaxFiles: 10}, "more than 10 files"},
		{"too deep", func(t *testing.T, ws string) string {
			rel := bundleDir(t, ws, "b", map[string]string{})
			os.MkdirAll(filepath.Join(ws, rel, "a/a/a/a/a/a"), 0o755)
			return rel
		}, Limits{MaxGzipBytes: 16 << 20, MaxDepth: 3}, "nested 4 directories deep"},
		{"control character name", func(t *testing.T, ws string) string {
			rel := bundleDir(t, ws, "b", map[string]string{})
			os.WriteFile(filepath.Join(ws, rel, "a\nb"), nil, 0o644)
			return rel
		}, lim, "control characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := t.TempDir()
			rel := c.setup(t, ws)
			dst := filepath.Join(t.TempDir(), "cands")
			start := time.Now()
			_, err := Pack(ctx, ws, rel, dst, c.lim)
			var be *BundleError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want a BundleError containing %q", err, c.want)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("refusal took %s", d)
			}
			if entries, _ := os.ReadDir(dst); len(entries) > 0 {
				t.Errorf("something was stored: %v", entries)
			}
		})
	}
}

func TestPackOverLimitGivesBothSizes(t *testing.T) {
	ws := t.TempDir()
	noise := make([]byte, 300<<10)
	rand.Read(noise)
	rel := bundleDir(t, ws, "b", map[string]string{"w.bin": string(noise)})
	dst := filepath.Join(t.TempDir(), "c")
	_, err := Pack(context.Background(), ws, rel, dst, DefaultLimits(100<<10))
	if err == nil || !strings.Contains(err.Error(), "over the track's limit of 102400 bytes (100.0 KiB)") || !strings.Contains(err.Error(), "bytes gzipped (300.") {
		t.Fatalf("got %v", err)
	}
	if entries, _ := os.ReadDir(dst); len(entries) > 0 {
		t.Errorf("an over-limit candidate was stored: %v", entries)
	}
}

func TestPackRoundTrip(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	rel := bundleDir(t, ws, "b", map[string]string{"sub/dir/w.bin": "weights", "run.sh": "#!/bin/sh\n"})
	os.Chmod(filepath.Join(ws, rel, "run.sh"), 0o755)
	c, err := Pack(ctx, ws, rel, t.TempDir(), DefaultLimits(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "u")
	u, err := Unpack(ctx, c.Path, dst, DefaultLimits(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	if u.Files != c.Files || u.RawBytes != c.RawBytes || u.Manifest.Entrypoint[1] != "predict.py" {
		t.Errorf("unpacked %+v from %+v", u, c)
	}
	b, _ := os.ReadFile(filepath.Join(dst, "sub/dir/w.bin"))
	st, _ := os.Stat(filepath.Join(dst, "run.sh"))
	st2, _ := os.Stat(filepath.Join(dst, "predict.py"))
	if string(b) != "weights" || st.Mode().Perm() != 0o755 || st2.Mode().Perm() != 0o644 {
		t.Errorf("content %q, modes %v %v", b, st.Mode(), st2.Mode())
	}
}

// hostile builds a .tar.gz from raw headers.
type hostileEntry struct {
	hdr  tar.Header
	body []byte
}

func hostileTar(t *testing.T, entries []hostileEntry, trailing []byte) string {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if len(e.body) > 0 {
			tw.Write(e.body)
		}
	}
	tw.Flush()
	if trailing == nil {
		tw.Close()
	} else {
		zw.Write(trailing)
	}
	zw.Close()
	p := filepath.Join(t.TempDir(), "b.tar.gz")
	os.WriteFile(p, buf.Bytes(), 0o644)
	return p
}

func manifestEntry() hostileEntry {
	return hostileEntry{tar.Header{Name: ManifestName, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(manifestJSON))}, []byte(manifestJSON)}
}

func predictEntry() hostileEntry {
	return hostileEntry{tar.Header{Name: "predict.py", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}, []byte("x=1")}
}

func TestUnpackRefusesHostileTars(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	reg := func(name string, body string) hostileEntry {
		return hostileEntry{tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))}, []byte(body)}
	}
	cases := []struct {
		name     string
		entries  []hostileEntry
		trailing []byte
		want     string
	}{
		{"absolute path", []hostileEntry{manifestEntry(), predictEntry(), reg("/etc/cron.d/x", "x")}, nil, "is not a clean relative path"},
		{"dot dot", []hostileEntry{manifestEntry(), predictEntry(), reg("../../escape", "x")}, nil, "is not a clean relative path"},
		{"inner dot dot", []hostileEntry{manifestEntry(), predictEntry(), reg("a/../../b", "x")}, nil, "is not a clean relative path"},
		{"symlink escape", []hostileEntry{manifestEntry(), predictEntry(), {hdr: tar.Header{Name: "w", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"}}}, nil, "w: is a symlink entry"},
		{"symlink then file through it", []hostileEntry{manifestEntry(), {hdr: tar.Header{Name: "d", Typeflag: tar.TypeSymlink, Linkname: outside}}, reg("d/x", "x")}, nil, "d: is a symlink entry"},
		{"hard link", []hostileEntry{manifestEntry(), predictEntry(), {hdr: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "predict.py"}}}, nil, "h: is a hard link entry"},
		{"device node", []hostileEntry{manifestEntry(), predictEntry(), {hdr: tar.Header{Name: "sda", Typeflag: tar.TypeBlock, Devmajor: 8}}}, nil, "sda: is a block device entry"},
		{"char device", []hostileEntry{manifestEntry(), predictEntry(), {hdr: tar.Header{Name: "mem", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 1}}}, nil, "mem: is a character device entry"},
		{"fifo", []hostileEntry{manifestEntry(), predictEntry(), {hdr: tar.Header{Name: "p", Typeflag: tar.TypeFifo}}}, nil, "p: is a FIFO entry"},
		{"10 GB sparse entry", []hostileEntry{manifestEntry(), predictEntry(), {hdr: tar.Header{Name: "sparse", Typeflag: tar.TypeGNUSparse, Size: 10 << 30, Format: tar.FormatGNU}}}, nil, "sparse: is a sparse file entry"},
		{"10 GB entry", []hostileEntry{manifestEntry(), predictEntry(), {hdr: tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: 10 << 30}}}, nil, "big: is 10737418240 bytes"},
		{"duplicate", []hostileEntry{manifestEntry(), predictEntry(), reg("predict.py", "y=2")}, nil, "appears twice"},
		{"file then dir", []hostileEntry{manifestEntry(), predictEntry(), reg("a", "x"), reg("a/b", "y")}, nil, "is a file, so it cannot also be a directory"},
		{"no manifest", []hostileEntry{predictEntry()}, nil, "has no sealrun-bundle.json"},
		{"entrypoint file missing", []hostileEntry{manifestEntry()}, nil, "names predict.py, which is not in the bundle"},
		{"trailing garbage", []hostileEntry{manifestEntry(), predictEntry()}, bytes.Repeat([]byte{'x'}, 20000), "valid tar stream"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := hostileTar(t, c.entries, c.trailing)
			dst := filepath.Join(t.TempDir(), "u")
			_, err := Unpack(ctx, p, dst, DefaultLimits(16<<20))
			var be *BundleError
			if !errors.As(err, &be) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want a BundleError containing %q", err, c.want)
			}
			if _, err := os.Stat(dst); !os.IsNotExist(err) {
				t.Errorf("the destination is left after a refusal")
			}
			if entries, _ := os.ReadDir(outside); len(entries) > 0 {
				t.Errorf("a file was written through a symlink: %v", entries)
			}
		})
	}
}

func TestUnpackGzipBombStopsAtCap(t *testing.T) {
	// 64 MiB of zeros in one entry: about 64 KiB gzipped, over an 8 MiB raw cap.
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: ManifestName, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(manifestJSON))})
	tw.Write([]byte(manifestJSON))
	tw.WriteHeader(&tar.Header{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: 64 << 20})
	tw.Write(make([]byte, 64<<20))
	tw.Close()
	zw.Close()
	p := filepath.Join(t.TempDir(), "bomb.tar.gz")
	os.WriteFile(p, buf.Bytes(), 0o644)
	_, err := Unpack(context.Background(), p, filepath.Join(t.TempDir(), "u"), Limits{MaxGzipBytes: 16 << 20, MaxRawBytes: 8 << 20})
	if err == nil || !strings.Contains(err.Error(), "zeros: is 67108864 bytes; the bundle may hold at most 8388608 bytes") {
		t.Fatalf("got %v", err)
	}
	// A bomb hidden after the tar's end (no header announces it) stops at the stream cap.
	buf.Reset()
	zw, _ = gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw = tar.NewWriter(zw)
	tw.WriteHeader(&tar.Header{Name: ManifestName, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(manifestJSON))})
	tw.Write([]byte(manifestJSON))
	tw.Close()
	zw.Write(make([]byte, 64<<20))
	zw.Close()
	os.WriteFile(p, buf.Bytes(), 0o644)
	_, err = Unpack(context.Background(), p, filepath.Join(t.TempDir(), "u"), Limits{MaxGzipBytes: 16 << 20, MaxRawBytes: 8 << 20})
	if err == nil || !strings.Contains(err.Error(), "decompresses to more than 8388608 bytes") {
		t.Fatalf("got %v", err)
	}
}

func TestUnpackRefusesOversizedFileAndNonGzip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.tar.gz")
	os.WriteFile(p, make([]byte, 2048), 0o644)
	if _, err := Unpack(context.Background(), p, filepath.Join(t.TempDir(), "u"), DefaultLimits(1024)); err == nil || !strings.Contains(err.Error(), "is 2048 bytes (2.0 KiB), over the limit of 1024 bytes") {
		t.Errorf("oversized: %v", err)
	}
	if _, err := Unpack(context.Background(), p, filepath.Join(t.TempDir(), "u"), DefaultLimits(16<<20)); err == nil || !strings.Contains(err.Error(), "is not gzip data") {
		t.Errorf("not gzip: %v", err)
	}
}

// A tarball made with `tar -C dir -czf b.tar.gz .` unpacks: "./" prefixes are dropped.
func TestUnpackTarDotPrefix(t *testing.T) {
	p := hostileTar(t, []hostileEntry{
		{hdr: tar.Header{Name: "./", Typeflag: tar.TypeDir, Mode: 0o755}},
		{hdr: tar.Header{Name: "./" + ManifestName, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(manifestJSON))}, body: []byte(manifestJSON)},
		{hdr: tar.Header{Name: "./predict.py", Typeflag: tar.TypeReg, Mode: 0o644, Size: 3}, body: []byte("x=1")},
	}, nil)
	if _, err := Unpack(context.Background(), p, filepath.Join(t.TempDir(), "u"), DefaultLimits(16<<20)); err != nil {
		t.Fatal(err)
	}
}

// An export packs only the files matching the globs (no manifest needed); what does not match is
// skipped whatever it is; what matches is checked like any bundle file; no match is refused.
func TestPackExport(t *testing.T) {
	ctx := context.Background()
	ws := t.TempDir()
	rel := bundleDir(t, ws, "out", map[string]string{"submission.csv": "label\n1\n", "preds/a.csv": "x", "preds/b.txt": "y", "model.pt": "weights"})
	os.Symlink("/etc/passwd", filepath.Join(ws, rel, "link"))
	c, err := PackExport(ctx, ws, rel, filepath.Join(t.TempDir(), "c"), DefaultLimits(16<<20), []string{"submission.csv", "preds/*.csv"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Files != 2 {
		t.Errorf("%d files packed; want submission.csv and preds/a.csv", c.Files)
	}
	u, err := UnpackExport(ctx, c.Path, filepath.Join(t.TempDir(), "u"), DefaultLimits(16<<20))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	filepath.Walk(u.Dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			r, _ := filepath.Rel(u.Dir, p)
			got = append(got, r)
		}
		return nil
	})
	if strings.Join(got, " ") != "preds/a.csv submission.csv" {
		t.Errorf("unpacked %q", got)
	}
	if _, err := PackExport(ctx, ws, rel, t.TempDir(), DefaultLimits(16<<20), []string{"*.parquet"}); err == nil || !strings.Contains(err.Error(), `has no file matching the task's file_export_globs ["*.parquet"]`) {
		t.Errorf("no match: %v", err)
	}
	if _, err := PackExport(ctx, ws, rel, t.TempDir(), DefaultLimits(16<<20), []string{"link"}); err == nil || !strings.Contains(err.Error(), "is a symlink") {
		t.Errorf("matched symlink: %v", err)
	}
}
