package leaderboard

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
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
	cmd.Env = append(os.Environ(), "HOME="+work, "TMPDIR="+work) // its temporary files removed with work
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

// The page fits a laptop and stays readable on a phone, measured in Chromium: at 1,400 px
// nothing scrolls sideways, the whole table included (its last column, "signed by", shown); at
// 400 px the page itself does not scroll sideways (the table and the chart scroll in their own
// boxes). LEADERBOARD_SHOT_DIR keeps the screenshots.
func TestHTMLFitsLaptopAndPhone(t *testing.T) {
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
	work := t.TempDir()
	// The test's copy measures itself once laid out and tells the page that frames it at the
	// width under test (a frame, because Chromium's window is at least 500 px wide).
	probe := `<script>addEventListener('load', () => { const d = document.documentElement; const boxes = [...document.querySelectorAll('.scroll')];
parent.postMessage(JSON.stringify({page: d.scrollWidth - d.clientWidth, boxes: boxes.map(b => b.scrollWidth - b.clientWidth)}), '*'); });</script>`
	os.WriteFile(filepath.Join(work, "board.html"), bytes.Replace(page.Bytes(), []byte("</body>"), []byte(probe+"</body>"), 1), 0o644)
	for _, w := range []int{1400, 400} {
		frame := filepath.Join(work, "frame-"+strconv.Itoa(w)+".html")
		os.WriteFile(frame, []byte(`<!DOCTYPE html><html><body style="margin:0"><iframe src="board.html" style="width:`+strconv.Itoa(w)+`px;height:1100px;border:0"></iframe>
<script>addEventListener('message', e => document.body.setAttribute('data-fit', e.data));</script></body></html>`), 0o644)
		run := func(args ...string) []byte {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, chromium, append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
				"--disable-background-networking", "--no-first-run", "--hide-scrollbars", "--allow-file-access-from-files", "--user-data-dir=" + filepath.Join(work, "profile"),
				"--window-size=" + strconv.Itoa(w+20) + ",1120"}, args...)...)
			cmd.Env = append(os.Environ(), "HOME="+work, "TMPDIR="+work) // its temporary files removed with work
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("chromium at %d px: %v", w, err)
			}
			return out
		}
		dom := run("--virtual-time-budget=3000", "--dump-dom", "file://"+frame)
		m := regexp.MustCompile(`data-fit="([^"]*)"`).FindSubmatch(dom)
		if m == nil {
			t.Fatalf("at %d px the page did not measure itself:\n%s", w, dom)
		}
		var fit struct {
			Page  int
			Boxes []int
		}
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(m[1]), "&quot;", `"`)), &fit); err != nil {
			t.Fatal(err)
		}
		t.Logf("at %d px: the page overflows by %d px, its boxes by %v px", w, fit.Page, fit.Boxes)
		if fit.Page > 0 {
			t.Errorf("at %d px the page scrolls sideways by %d px", w, fit.Page)
		}
		if w == 1400 {
			for i, o := range fit.Boxes {
				if o > 0 {
					t.Errorf("at 1400 px box %d (a chart or a table) scrolls sideways by %d px: it should fit a laptop", i, o)
				}
			}
		}
		if d := os.Getenv("LEADERBOARD_SHOT_DIR"); d != "" {
			run("--virtual-time-budget=3000", "--screenshot="+filepath.Join(d, "leaderboard-"+strconv.Itoa(w)+".png"), "file://"+frame)
		}
	}
}
