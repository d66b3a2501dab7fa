// Package browsertest drives a real browser for tests: Debian's Chromium, headless, started by
// chromedp (the well-kept Go library for the DevTools protocol) with nothing of its own reaching
// the network, and writes screenshots as test artefacts. It is for _test files only.
package browsertest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/sealrun/sealrun/internal/testenv"
)

// Browser is one headless Chromium and the messages its pages logged.
type Browser struct {
	Ctx    context.Context
	t      testing.TB
	mu     sync.Mutex
	errors []string
}

// New starts a headless Chromium (Debian's chromium; make deps installs it) for the test, its
// profile in a temporary directory, and stops it when the test ends. Its pages' console errors
// and warnings and uncaught exceptions are kept (Errors).
func New(t testing.TB) *Browser {
	t.Helper()
	exe := testenv.RequireTool(t, "chromium", "chromium")
	dir := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.UserDataDir(filepath.Join(dir, "profile")),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-features", "MediaRouter,OptimizationHints,Translate"),
		chromedp.WindowSize(1280, 1000),
		// Its own temporary files (org.chromium.Chromium.*) in the test's directory too, removed
		// with it: left in /tmp they outlived every test.
		chromedp.Env("HOME="+dir, "TMPDIR="+dir),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	b := &Browser{Ctx: ctx, t: t}
	t.Cleanup(func() {
		cancelC()
		cancelA()
	})
	err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
				}
				msg = "console " + string(e.Type) + ": " + strings.Join(parts, " ")
			}
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.errors = append(b.errors, msg)
			b.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("start chromium (%s): %v", exe, err)
	}
	return b
}

// Do runs actions that return nothing, with a time limit.
func (b *Browser) Do(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.Ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Eval evaluates a JavaScript expression in the page and decodes its value (a promise's, once
// it settles).
func Eval[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// Errors are the console errors and uncaught exceptions the pages logged so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// Screenshot writes the page as it is on screen to the test artefacts (ArtifactDir) as
// name.png, and returns its path.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	p := filepath.Join(ArtifactDir(b.t), name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
	}
	b.t.Logf("screenshot: %s", p)
	return p
}

// ArtifactDir is where a test's artefacts go: $SEALRUN_TEST_ARTIFACTS (make test sets it) or
// the system's temporary directory, under sealrun-test-artifacts, then the test's name.
func ArtifactDir(t testing.TB) string {
	root := os.Getenv("SEALRUN_TEST_ARTIFACTS")
	if root == "" {
		root = filepath.Join(os.TempDir(), "sealrun-test-artifacts")
	}
	d := filepath.Join(root, strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()))
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}
