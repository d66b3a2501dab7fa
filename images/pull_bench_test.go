package images

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/sealrun/sealrun/images/registrytest"
	"github.com/sealrun/sealrun/internal/testenv"
)

// bigLayer writes a tar layer of one file of n incompressible bytes (as the largest shared
// libraries of a CUDA image are, near enough) and returns it as a gzip layer.
func bigLayer(b *testing.B, dir string, seed uint64, n int64) v1.Layer {
	b.Helper()
	path := filepath.Join(dir, fmt.Sprintf("layer-%d.tar", seed))
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(bw)
	tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("usr/lib/blob-%d.so", seed), Mode: 0o644, Size: n, Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)})
	rng := rand.New(rand.NewPCG(seed, 7))
	chunk := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(chunk)) {
		for i := 0; i < len(chunk); i += 8 {
			v := rng.Uint64()
			for j := 0; j < 8; j++ {
				chunk[i+j] = byte(v >> (8 * j))
			}
		}
		tw.Write(chunk[:min(int64(len(chunk)), left)])
	}
	tw.Close()
	bw.Flush()
	f.Close()
	l, err := tarball.LayerFromFile(path, tarball.WithCompressionLevel(gzip.BestSpeed), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// BenchmarkPullVsSkopeo: a 1 GiB image (four 256 MiB layers) pulled from a real registry on
// loopback (TLS, a password) into the store, against `skopeo copy` of the same image to a
// directory in the same run; then an image sharing those layers (one small layer more), which
// must move none of them. Reports the fetch (registry to the store's verified blobs), the whole
// pull (fetch, verify, unpack, tree hash) and skopeo, and their ratios.
func BenchmarkPullVsSkopeo(b *testing.B) {
	skopeo := testenv.RequireTool(b, "skopeo", "skopeo")
	reg := registrytest.Start(b)
	ctx := context.Background()
	o := Registry{CAFile: reg.CAFile, AuthFile: reg.AuthFile}
	dir := b.TempDir()
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	for i := uint64(1); i <= 4; i++ {
		var err error
		if img, err = mutate.AppendLayers(img, bigLayer(b, dir, i, 256<<20)); err != nil {
			b.Fatal(err)
		}
	}
	src, err := OpenStore(filepath.Join(dir, "src"))
	if err != nil {
		b.Fatal(err)
	}
	rec, err := src.add(ctx, img, "bench/big", SourceLocalBuild, "bench", "")
	if err != nil {
		b.Fatal(err)
	}
	ref, err := src.Push(ctx, rec.Digest, reg.Ref("bench/big:1"), o)
	if err != nil {
		b.Fatal(err)
	}
	small := mutate.MediaType(img, types.OCIManifestSchema1)
	small, _ = mutate.AppendLayers(small, bigLayer(b, dir, 9, 64<<10))
	rec2, err := src.add(ctx, small, "bench/big2", SourceLocalBuild, "bench", "")
	if err != nil {
		b.Fatal(err)
	}
	ref2, err := src.Push(ctx, rec2.Digest, reg.Ref("bench/big2:1"), o)
	if err != nil {
		b.Fatal(err)
	}
	certs := filepath.Join(dir, "certs")
	os.MkdirAll(certs, 0o700)
	ca, _ := os.ReadFile(reg.CAFile)
	os.WriteFile(filepath.Join(certs, "ca.crt"), ca, 0o600)
	var pullS, fetchS, skopeoS, sharedFetched float64
	var size int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dst, err := OpenStore(filepath.Join(b.TempDir(), "dst"))
		if err != nil {
			b.Fatal(err)
		}
		fetched := 0.0
		testHookFetchDone = func(d time.Duration) { fetched = d.Seconds() }
		b.StartTimer()
		_, st, err := dst.PullFrom(ctx, ref, o)
		b.StopTimer()
		testHookFetchDone = nil
		if err != nil {
			b.Fatal(err)
		}
		pullS += st.Took.Seconds()
		fetchS += fetched
		size = st.TotalSize
		_, st2, err := dst.PullFrom(ctx, ref2, o)
		if err != nil {
			b.Fatal(err)
		}
		sharedFetched += float64(st2.Fetched)
		out := filepath.Join(b.TempDir(), "skopeo")
		t0 := time.Now()
		cmd := exec.Command(skopeo, "copy", "--src-cert-dir", certs, "--src-creds", reg.User+":"+reg.Password, "docker://"+ref, "dir:"+out)
		if o, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("skopeo copy: %v %s", err, o)
		}
		skopeoS += time.Since(t0).Seconds()
	}
	n := float64(b.N)
	b.ReportMetric(float64(size)/(1<<30), "GiB")
	b.ReportMetric(fetchS/n, "fetch-s")
	b.ReportMetric(pullS/n, "pull-s")
	b.ReportMetric(skopeoS/n, "skopeo-s")
	b.ReportMetric(skopeoS/fetchS, "fetch-ratio")
	b.ReportMetric(skopeoS/pullS, "pull-ratio")
	b.ReportMetric(sharedFetched/n, "shared-image-fetched-bytes")
}
