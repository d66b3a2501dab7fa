package leaderboard

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/internal/testenv"
)

// The HTML page, rendered by a real browser (headless Chromium), draws its chart: the page is
// not blank, and the error bars (their red) and the mean dots (their blue) are there.
func TestHTMLRendersInChromium(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the browser test runs on the Linux CI machine")
	}
	chromium := testenv.RequireTool(t, "chromium", "chromium")
	dir, keys := scenario(t)
	in, err := Load([]string{dir}, keys, nil)
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := Build(in, keys).Render(&page, "html"); err != nil {
		t.Fatal(err)
	}
	// Self-contained: nothing is fetched from anywhere; the only links are to each run's
	// report.html beside its attestation (no scheme, no host).
	if m := regexp.MustCompile(`src=|href="[^"]*:|href="//|https?://[^"]*[^g"]"|@import|url\(`).FindString(page.String()); m != "" && !strings.Contains(m, "www.w3.org/2000/svg") {
		t.Errorf("the page refers to an outside resource: %q", m)
	}
	if n := strings.Count(page.String(), `/report.html">seed `); n != 12 {
		t.Errorf("%d links to the runs' report.html, want one per run, valid and invalid, of every table (12)", n)
	}
	work := t.TempDir()
	html := filepath.Join(work, "board.html")
	os.WriteFile(html, page.Bytes(), 0o644)
	shot := filepath.Join(work, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--no-first-run", "--user-data-dir="+filepath.Join(work, "profile"),
		"--window-size=1100,1400", "--screenshot="+shot, "file://"+html)
	cmd.Env = append(os.Environ(), "HOME="+work)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	if d := os.Getenv("LEADERBOARD_SHOT_DIR"); d != "" {
		b, _ := os.ReadFile(shot)
		os.WriteFile(filepath.Join(d, "shot.png"), b, 0o644)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	near := func(r, g, b uint32, R, G, B int) bool {
		d := func(x uint32, y int) int { v := int(x>>8) - y; return max(v, -v) }
		return d(r, R) < 40 && d(g, G) < 40 && d(b, B) < 40
	}
	var ink, red, blue int
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 < 240 || g>>8 < 240 || b>>8 < 240 {
				ink++
			}
			if near(r, g, b, 0xc0, 0x39, 0x2b) {
				red++
			}
			if near(r, g, b, 0x1f, 0x5f, 0xbf) {
				blue++
			}
		}
	}
	total := bounds.Dx() * bounds.Dy()
	t.Logf("screenshot %dx%d: %d non-white, %d error-bar red, %d dot blue pixels", bounds.Dx(), bounds.Dy(), ink, red, blue)
	if ink < total/100 {
		t.Errorf("the page looks blank: %d of %d pixels drawn", ink, total)
	}
	// Three rows have an SE (alpha, beta, gamma): each bar is a 3 px line plus two caps.
	if red < 3*3*20 {
		t.Errorf("error bars missing: %d red pixels", red)
	}
	if blue < 4*20 {
		t.Errorf("mean dots missing: %d blue pixels", blue)
	}
}
