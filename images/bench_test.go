package images

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// benchLayer writes a ~200 MB uncompressed tar layer shaped like a Python image: many small
// files, some large ones, directories and symlinks. It returns the path and its size.
func benchLayer(b *testing.B, dir string) (string, int64) {
	b.Helper()
	path := filepath.Join(dir, "layer.tar")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(bw)
	rng := rand.New(rand.NewPCG(1, 2))
	chunk := make([]byte, 8<<20)
	for i := range chunk {
		chunk[i] = byte(rng.Uint32())
	}
	var total int64
	for d := 0; total < 200<<20; d++ {
		dn := fmt.Sprintf("usr/lib/python3/dist-packages/pkg%03d", d)
		tw.WriteHeader(&tar.Header{Name: dn + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: Epoch})
		for i := 0; i < 40; i++ {
			size := 2 << 10
			switch {
			case i%20 == 0:
				size = 4 << 20
			case i%4 == 0:
				size = 64 << 10
			}
			tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%s/m%02d.py", dn, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(size), ModTime: Epoch})
			off := rng.IntN(len(chunk) - size)
			tw.Write(chunk[off : off+size])
			total += int64(size)
		}
		tw.WriteHeader(&tar.Header{Name: dn + "/latest", Typeflag: tar.TypeSymlink, Linkname: "m00.py", ModTime: Epoch})
	}
	tw.Close()
	bw.Flush()
	f.Close()
	st, _ := os.Stat(path)
	return path, st.Size()
}

// BenchmarkUnpackVsTar unpacks the same ~200 MB layer with sealrun's safe unpacker and with GNU
// tar -x, each into a fresh directory, and reports both rates and their ratio.
func BenchmarkUnpackVsTar(b *testing.B) {
	testenv.RequireTool(b, "tar", "tar")
	work := b.TempDir()
	path, size := benchLayer(b, work)
	open := func() (io.ReadCloser, error) { return os.Open(path) }
	var ours, theirs time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst := filepath.Join(work, fmt.Sprintf("ours-%d", i))
		os.Mkdir(dst, 0o755)
		t0 := time.Now()
		if _, err := Unpack(context.Background(), "bench", []Layer{{Digest: "sha256:bench", Open: open}}, dst, UnpackOptions{Chown: os.Geteuid() == 0}); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(t0)
		tdst := filepath.Join(work, fmt.Sprintf("tar-%d", i))
		os.Mkdir(tdst, 0o755)
		t0 = time.Now()
		if out, err := exec.Command("tar", "-xf", path, "-C", tdst).CombinedOutput(); err != nil {
			b.Fatalf("tar: %v %s", err, out)
		}
		theirs += time.Since(t0)
		b.StopTimer()
		os.RemoveAll(dst)
		os.RemoveAll(tdst)
		b.StartTimer()
	}
	mb := float64(size) / 1e6 * float64(b.N)
	b.ReportMetric(mb/ours.Seconds(), "sealrun-MB/s")
	b.ReportMetric(mb/theirs.Seconds(), "tar-MB/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
}

// BenchmarkVerifyVsSha256sum verifies an image holding the ~200 MB layer (gzip) in the store —
// manifest, config, blob digests, diff ids, rootfs tree — and runs sha256sum over the same blob
// files; MB/s are of blob bytes on disk.
func BenchmarkVerifyVsSha256sum(b *testing.B) {
	testenv.RequireTool(b, "sha256sum", "coreutils")
	work := b.TempDir()
	path, _ := benchLayer(b, work)
	layer, err := tarball.LayerFromFile(path, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
	if err != nil {
		b.Fatal(err)
	}
	img, _ := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	lp, _ := layout.Write(filepath.Join(work, "oci"), empty.Index)
	if err := lp.AppendImage(img); err != nil {
		b.Fatal(err)
	}
	s, err := OpenStore(filepath.Join(work, "state"), WithUnpackOptions(UnpackOptions{Chown: os.Geteuid() == 0}))
	if err != nil {
		b.Fatal(err)
	}
	rec, err := s.Import(context.Background(), filepath.Join(work, "oci"), "", "bench")
	if err != nil {
		b.Fatal(err)
	}
	dir, _ := s.Dir(rec.Digest)
	blobs, _ := filepath.Glob(filepath.Join(dir, "layout/blobs/sha256/*"))
	var blobBytes int64
	for _, p := range blobs {
		st, _ := os.Stat(p)
		blobBytes += st.Size()
	}
	var ours, theirs time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := s.Verify(context.Background(), rec.Digest); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(t0)
		t0 = time.Now()
		if out, err := exec.Command("sha256sum", blobs...).CombinedOutput(); err != nil {
			b.Fatalf("sha256sum: %v %s", err, out)
		}
		theirs += time.Since(t0)
	}
	mb := float64(blobBytes) / 1e6 * float64(b.N)
	b.ReportMetric(mb/ours.Seconds(), "sealrun-MB/s")
	b.ReportMetric(mb/theirs.Seconds(), "sha256sum-MB/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
}

// BenchmarkUnpackPythonLayer: the local python image's layer (about 530 MB of gzip, 1.1 GiB of
// files, the runner's and grader's), decompressed and unpacked safely into a fresh directory,
// vs GNU tar -xzf of the same blob (target: ratio >= 0.8). It needs the local images (make test).
func BenchmarkUnpackPythonLayer(b *testing.B) {
	_, digest, blobs := pythonImage(b)
	var blob string
	var size int64
	for _, p := range blobs {
		if fi, err := os.Stat(p); err == nil && fi.Size() > size {
			blob, size = p, fi.Size()
		}
	}
	if size < 100<<20 {
		b.Fatalf("no large layer among %v", blobs)
	}
	open := func() (io.ReadCloser, error) {
		f, err := os.Open(blob)
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<20))
		if err != nil {
			f.Close()
			return nil, err
		}
		return struct {
			io.Reader
			io.Closer
		}{zr, f}, nil
	}
	work := b.TempDir()
	var ours, theirs time.Duration
	var files, bytes int64
	// Each side starts from the same state: the other's files removed and the dirty pages of
	// every earlier write on disk (sync, untimed), the blob in the page cache; the order
	// alternates, so that neither always follows the other's writeback.
	sideOurs := func(i int) {
		dst := filepath.Join(work, fmt.Sprintf("ours-%d", i))
		os.Mkdir(dst, 0o755)
		t0 := time.Now()
		rep, err := Unpack(context.Background(), "python", []Layer{{Digest: digest, Open: open}}, dst, UnpackOptions{Chown: os.Geteuid() == 0})
		if err != nil {
			b.Fatal(err)
		}
		ours += time.Since(t0)
		files, bytes = rep.Files, rep.Bytes
		b.StopTimer()
		os.RemoveAll(dst)
		syscall.Sync()
		b.StartTimer()
	}
	sideTar := func(i int) {
		tdst := filepath.Join(work, fmt.Sprintf("tar-%d", i))
		os.Mkdir(tdst, 0o755)
		t0 := time.Now()
		if out, err := exec.Command("tar", "-xzf", blob, "-C", tdst).CombinedOutput(); err != nil {
			b.Fatalf("tar: %v %s", err, out)
		}
		theirs += time.Since(t0)
		b.StopTimer()
		os.RemoveAll(tdst)
		syscall.Sync()
		b.StartTimer()
	}
	if f, err := os.Open(blob); err == nil {
		io.Copy(io.Discard, f)
		f.Close()
	}
	syscall.Sync()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			sideOurs(i)
			sideTar(i)
		} else {
			sideTar(i)
			sideOurs(i)
		}
	}
	n := float64(b.N)
	b.ReportMetric(ours.Seconds()/n, "sealrun-s")
	b.ReportMetric(theirs.Seconds()/n, "tar-s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
	b.ReportMetric(float64(files), "files")
	b.ReportMetric(float64(bytes)/1e6, "MB")
}

// pythonImage is the local python image (make test builds it): its store, digest and blob files.
func pythonImage(b *testing.B) (*Store, string, []string) {
	im := testenv.LocalImages(b)
	d, err := ParsePinned(im.Refs["python"])
	if err != nil {
		b.Fatal(err)
	}
	s, err := OpenStore(im.State)
	if err != nil {
		b.Fatal(err)
	}
	blobs, _ := filepath.Glob(filepath.Join(im.State, "images", "sha256", strings.TrimPrefix(d.DigestStr(), "sha256:"), "layout", "blobs", "sha256", "*"))
	return s, d.DigestStr(), blobs
}

// BenchmarkHashPythonLayer: the python image's blobs (its ~530 MB layer, gzip, and config)
// checked against their digests as an import or a build checks them once written (checkBlobs),
// vs sha256sum of the same files (target: ratio >= 0.9).
func BenchmarkHashPythonLayer(b *testing.B) {
	testenv.RequireTool(b, "sha256sum", "coreutils")
	s, digest, blobs := pythonImage(b)
	img, err := s.image(digest)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, p := range blobs {
		if fi, err := os.Stat(p); err == nil {
			size += fi.Size()
		}
	}
	var ours, theirs time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := checkBlobs(context.Background(), "python", img); err != nil {
			b.Fatal(err)
		}
		ours += time.Since(t0)
		t0 = time.Now()
		if out, err := exec.Command("sha256sum", blobs...).CombinedOutput(); err != nil {
			b.Fatalf("sha256sum: %v %s", err, out)
		}
		theirs += time.Since(t0)
	}
	mb := float64(size) / 1e6 * float64(b.N)
	b.ReportMetric(mb/ours.Seconds(), "sealrun-MB/s")
	b.ReportMetric(mb/theirs.Seconds(), "sha256sum-MB/s")
	b.ReportMetric(theirs.Seconds()/ours.Seconds(), "ratio")
	b.ReportMetric(float64(size)/1e6, "MB")
}

// BenchmarkPackPythonRootfs: the python image's rootfs (1.1 GiB of files) packed into one
// reproducible layer as a build packs it (WriteLayerTar: sorted, numeric owners, fixed times,
// through gzip's fastest level) vs GNU tar -c --sort=name | gzip -1 of the same tree
// (target: ratio >= 0.8).
func BenchmarkPackPythonRootfs(b *testing.B) {
	testenv.RequireTool(b, "gzip", "gzip")
	s, digest, _ := pythonImage(b)
	root, err := s.Rootfs(digest)
	if err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	ours := filepath.Join(work, "ours.tar.gz")
	theirs := filepath.Join(work, "tar.tar.gz")
	var tOurs, tTheirs time.Duration
	var size, tarSize int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		f, err := os.Create(ours)
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
		if err := WriteLayerTar(zw, root, nil); err != nil {
			b.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			b.Fatal(err)
		}
		bw.Flush()
		f.Close()
		tOurs += time.Since(t0)
		t0 = time.Now()
		sh := fmt.Sprintf("tar -c --sort=name --numeric-owner -f - -C %q . | gzip -1 > %q", root, theirs)
		if out, err := exec.Command("sh", "-c", sh).CombinedOutput(); err != nil {
			b.Fatalf("tar | gzip -1: %v %s", err, out)
		}
		tTheirs += time.Since(t0)
		fi, _ := os.Stat(ours)
		size = fi.Size()
		fi, _ = os.Stat(theirs)
		tarSize = fi.Size()
	}
	n := float64(b.N)
	b.ReportMetric(tOurs.Seconds()/n, "sealrun-s")
	b.ReportMetric(tTheirs.Seconds()/n, "tar-gzip-s")
	b.ReportMetric(tTheirs.Seconds()/tOurs.Seconds(), "ratio")
	b.ReportMetric(float64(size)/1e6, "gz-MB")
	b.ReportMetric(float64(tarSize)/1e6, "tar-gz-MB")
}
