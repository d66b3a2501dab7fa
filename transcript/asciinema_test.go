package transcript_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sealrun/sealrun/internal/browsertest"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/transcript"
	"github.com/sealrun/sealrun/transcript/transcripttest"
)

// TestPlayerAgreesWithAsciinema: a human run's recording, made of what real programs wrote to a
// real terminal (ls's colours, tput's full-screen, scrolling-region, insert and erase sequences
// from the xterm-256color terminfo entry, a wrapped line, hostile bytes, the window grown and
// shrunk), is read by
// asciinema's own web player (npm's asciinema-player, which make test installs) as the
// asciicast v2 stream it claims to be, and at every step the page's own player shows the same
// screen, row by row, as asciinema's does. Screenshots of both are kept.
func TestPlayerAgreesWithAsciinema(t *testing.T) {
	bundle := asciinemaPlayer(t)
	testenv.RequireTool(t, "script", "bsdutils")
	testenv.RequireTool(t, "tput", "ncurses-bin")
	b := browsertest.New(t)
	r, rec := newRecording(t)

	// Each step is what a program wrote to a 100x20 pseudo-terminal (script(1) gives it one, so
	// a newline reaches the recording as a terminal sends it), at the step's second.
	steps := []string{
		`printf '[sealrun] ~ $ '`,
		`ls --color=always -la /etc | head -30; printf '[sealrun] ~ $ '`,
		`seq 1 24 | paste - - -; printf 'price €5, naïve café\n'`,
		`printf 'abcdefghij'; tput cub 4; tput el; echo; printf 'tab\there\n'; printf 'over\rOV\n'; printf 'bs\b\bBS\n'`,
		`printf '%250s\n' '' | tr ' ' w; printf 'wrapped above\n'`,
		`tput smcup; tput clear; tput cup 4 9; printf 'FULLSCREEN EDITOR'; tput cup 6 2; tput bold; tput setaf 1; printf red; tput sgr0; tput cup 19 0; printf 'status line'`,
		`tput csr 2 10; tput cup 10 0; seq 1 15; tput csr 0 19; tput cup 0 0; tput el; printf top; tput cup 12 0; tput il 2; printf inserted; tput cup 15 3; tput dl 1; tput cup 16 5; tput ech 3`,
		`tput cup 1 0; printf 'row1'; tput csr 2 10; tput cup 3 0; printf 'a\nb\nc\nd\ne'; tput cup 4 0; printf '\033[99L'; tput cup 2 0; printf 'xyzw'; tput cup 2 1; printf '\033[99@'; tput cup 8 0; printf '\033[99M'; tput cup 9 0; printf 'kept\033[3D\033[2@'; tput csr 0 19`,
		`tput rmcup; printf 'back from the editor\n'`,
		`tput cup 3 0; tput ed; printf 'cleared below row 3\n'`,
	}
	sec := 1.0
	for _, s := range steps {
		cmd := exec.Command("script", "-q", "-E", "never", "-c", "stty cols 100 rows 20; "+s, "/dev/null")
		cmd.Env = append(os.Environ(), "TERM=xterm-256color", "LC_ALL=C.UTF-8", "LS_COLORS=")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("script -c %q: %v", s, err)
		}
		if sec == 2 {
			rec.Input([]byte("ls -la /etc\r"), at(sec-0.1))
		}
		rec.Output(out, at(sec))
		sec++
	}
	// Bytes no program should send, and a terminal grown by its person's window.
	rec.Output([]byte("\x1b]52;c;cm0gLXJmIC8=\x07\x1b]0;pwned title\x07\x1b]8;;http://evil.example/\x1b\\a link\x1b]8;;\x1b\\ <img src=x onerror=\"window.pwned=1\"> bad\xff\xfe bytes\r\n"), at(sec))
	sec++
	rec.Resize(120, 24, at(sec))
	rec.Output([]byte(strings.Repeat("r", 110)+"\r\nwider now\r\n"), at(sec+0.2))
	sec++
	rec.Resize(70, 12, at(sec)) // and shrunk: narrower and shorter
	rec.Output([]byte("narrower now\r\n[sealrun] ~ $ "), at(sec+0.2))
	sec++
	if err := rec.Close(at(sec)); err != nil {
		t.Fatal(err)
	}
	cast, _, _, err := transcripttest.Recording(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transcript.Build(r.Dir, header(), transcript.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var times []float64
	for s := 1.5; s < sec; s++ {
		times = append(times, s)
	}

	// The page's own player, at each step.
	if err := b.Do(60*time.Second, chromedp.Navigate(writePage(t, tr)), chromedp.WaitVisible(chromedp.CSS(`body[data-ready="1"]`))); err != nil {
		t.Fatal(err)
	}
	ours := map[float64][]string{}
	for _, s := range times {
		rows, err := browsertest.Eval[[]string](b, fmt.Sprintf(`(function(){var p=document.getElementById('tpos');p.value=String(Math.round(%g*10));p.dispatchEvent(new Event('input'));return Array.from(document.getElementById('tscreen').children).map(function(d){return d.textContent});})()`, s))
		if err != nil {
			t.Fatal(err)
		}
		ours[s] = rows
		if s == 6.5 {
			b.Screenshot("ours-fullscreen")
		}
	}

	// asciinema's player, the recording given to it whole, as asciinema play would read it.
	castJSON, _ := json.Marshal(string(cast)) // <, > and & escaped: nothing in it closes the script
	page := filepath.Join(t.TempDir(), "asciinema.html")
	html := "<!doctype html><meta charset=utf-8><style>" + string(bundle.css) + "</style><div id=p></div><script>" + string(bundle.js) +
		"</script><script>window.P = AsciinemaPlayer.create({data: " + string(castJSON) + "}, document.getElementById('p'), {preload: true, fit: false});</script>"
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := b.Do(60*time.Second, chromedp.Navigate("file://"+page)); err != nil {
		t.Fatal(err)
	}
	if d, err := browsertest.Eval[float64](b, `(async function(){for(var i=0;i<200;i++){var d=await P.getDuration();if(d)return d;await new Promise(function(r){setTimeout(r,50)})}return 0})()`); err != nil || d < sec-1.5 {
		t.Fatalf("asciinema's player did not load the recording: duration %v, %v; page errors %q", d, err, b.Errors())
	}
	for _, s := range times {
		if _, err := browsertest.Eval[bool](b, fmt.Sprintf(`P.seek(%g).then(function(){return true})`, s)); err != nil {
			t.Fatalf("asciinema's player: seek to %.1f s: %v", s, err)
		}
		// It draws the screen in a later frame: read it until it shows the page's, 5 s at most.
		want := strings.Join(screenRows(ours[s]), "\n")
		var got string
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			rows, err := browsertest.Eval[[]string](b, `Array.from(document.querySelectorAll('.ap-term-text .ap-line')).map(function(l){return l.textContent})`)
			if err != nil {
				t.Fatal(err)
			}
			if got = strings.Join(screenRows(rows), "\n"); got == want || time.Now().After(deadline) {
				break
			}
		}
		if s == 6.5 {
			b.Screenshot("asciinema-fullscreen")
		}
		if got != want {
			t.Errorf("at %.1f s asciinema's player shows\n%s\nthe page's player\n%s", s, got, want)
		}
	}
	if st, err := browsertest.Eval[int](b, `window.pwned || 0`); err != nil || st != 0 {
		t.Errorf("asciinema's page ran the recording's markup: %v, %v", st, err)
	}
	if errs := b.Errors(); len(errs) > 0 {
		t.Errorf("the pages logged errors: %q", errs)
	}
}

// screenRows is a screen as rows of text without trailing blanks, trailing blank rows dropped.
func screenRows(rows []string) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, strings.TrimRight(strings.ReplaceAll(r, "\u00a0", " "), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

type playerBundle struct{ js, css []byte }

// asciinemaPlayer is asciinema's web player as npm ships it, from where make test installs it
// beside the SDKs (scripts/sdk-clients.sh, testdata/sdk's lock file).
func asciinemaPlayer(t *testing.T) playerBundle {
	t.Helper()
	state := os.Getenv("SEALRUN_TEST_STATE")
	dir := filepath.Join(state, "sdk-clients", "node_modules", "asciinema-player", "dist", "bundle")
	js, err1 := os.ReadFile(filepath.Join(dir, "asciinema-player.min.js"))
	css, err2 := os.ReadFile(filepath.Join(dir, "asciinema-player.css"))
	if state == "" || err1 != nil || err2 != nil {
		testenv.Missing(t, "asciinema's web player (npm's asciinema-player) is not installed in $SEALRUN_TEST_STATE/sdk-clients; make test installs it (scripts/sdk-clients.sh)")
	}
	return playerBundle{js, css}
}
