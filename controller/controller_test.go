package controller

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller/scriptedmodel"
	"github.com/sealrun/sealrun/sandbox"
	"github.com/sealrun/sealrun/sandbox/sandboxtest"
)

// A scaffold in a real controller container: its only peer is the gateway (in the run's netns),
// which reaches the fake provider on the host's loopback with the real key; the agent's own key
// never arrives; another model and another path are refused; the host's listeners — the fake
// provider itself, a 0.0.0.0 listener, an admin-like unix socket — stay out of reach. The
// environment contract is what the scaffold sees; the transcript is kept; Stop freezes and kills.
func TestControllerThroughGateway(t *testing.T) {
	h := sandboxtest.Host(t)
	imgs := sandboxtest.LocalImages(t)
	ctx := context.Background()
	run, err := h.NewRun(ctx, "ctl-gw")
	if err != nil {
		t.Fatal(err)
	}
	defer run.Destroy(ctx)
	ws := sandboxtest.Workspace(t, run)
	os.WriteFile(filepath.Join(ws, "BRIEF.md"), []byte("# the task\n"), 0o644)

	prov := scriptedmodel.New()
	defer prov.Close()
	dir := t.TempDir()
	log, _ := audit.Open(filepath.Join(dir, "audit.jsonl"))
	defer log.Close()
	agent := Agent{Provider: "openai", Model: "gpt-x", Effort: "high"}
	g, err := NewGateway(ProviderConfig{Name: "openai", BaseURL: prov.URL + "/v1", KeyFile: keyFile(t, "real-provider-key")}, agent, log)
	if err != nil {
		t.Fatal(err)
	}
	l, err := sandbox.ListenGateway(ctx, run.GatewayNetns(), DefaultPort)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: g, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	defer srv.Close()
	any, _ := net.Listen("tcp4", "0.0.0.0:0")
	defer any.Close()
	anyPort := strconv.Itoa(any.Addr().(*net.TCPAddr).Port)
	provPort := strings.TrimPrefix(prov.URL, "http://127.0.0.1:")

	body := `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`
	other := `{"model":"gpt-bigger"}`
	req := func(path, b string) string {
		// stdin stays open a moment: a client that half-closes has gone away, as far as the
		// gateway knows, and its request is cancelled.
		return fmt.Sprintf(`(printf 'POST %s HTTP/1.0\r\nHost: g\r\nAuthorization: Bearer agent-key\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s'; sleep 2) | nc -w 5 10.88.0.1 8080`, path, len(b), b)
	}
	script := strings.Join([]string{
		`echo "env: $SEALRUN_GATEWAY $SEALRUN_MODEL $SEALRUN_EFFORT $OPENAI_BASE_URL $SEALRUN_BRIEF"`,
		`echo "pwd: $(pwd) uid: $(id -u)"`,
		req("/v1/chat/completions", body),
		req("/v1/chat/completions", other),
		req("/v1/embeddings", "{}"),
		`echo | nc -w 2 127.0.0.1 ` + provPort + ` && echo REACHED-PROVIDER-LOOPBACK`,
		`echo | nc -w 2 10.88.0.1 ` + provPort + ` && echo REACHED-PROVIDER-VIA-GATEWAY-ADDR`,
		`echo "run: $(ls /run/sealrun | tr '\n' ' ')"`, // the agent socket only; no admin socket
		`echo | nc -w 2 10.88.0.1 ` + anyPort + ` && echo REACHED-HOST-ANY`,
		`echo done; sleep 600`,
	}, "\n")
	transcript := filepath.Join(dir, "transcript.log")
	c, err := Start(ctx, run, Config{Rootfs: imgs.Controller, Entrypoint: []string{"sh", "-c", script}, Workspace: ws, Runner: sandboxtest.Static(t, "cmd/runner"),
		Socket: emptySocket(t, int(run.SharedGID())), Agent: agent, Kind: KindOpenAI, Transcript: transcript})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(transcript); strings.Contains(string(b), "done\n") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t0 := time.Now()
	if err := c.Stop(ctx); err != nil {
		t.Error(err)
	}
	if time.Since(t0) > 15*time.Second {
		t.Errorf("Stop took %v", time.Since(t0))
	}
	out, _ := os.ReadFile(transcript)
	s := string(out)
	for _, want := range []string{
		"env: http://10.88.0.1:8080 gpt-x high http://10.88.0.1:8080/v1 /workspace/BRIEF.md\n",
		"pwd: /workspace uid: 1000\n",
		"hello from the fake provider",
		`gpt-bigger\" refused`,
		"is not forwarded",
		"run: agent.sock \n",
		"done\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("transcript lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "REACHED") {
		t.Errorf("the controller reached a host listener:\n%s", s)
	}
	reqs := prov.Requests()
	if len(reqs) != 1 || reqs[0].Header.Get("Authorization") != "Bearer real-provider-key" {
		t.Errorf("the provider saw %d requests: %+v", len(reqs), reqs)
	}
}

// emptySocket is a unix socket for the agent-socket mount (nothing serves it here).
func emptySocket(t *testing.T, gid int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	os.Chown(p, 0, gid)
	os.Chmod(p, 0o660)
	return p
}

// The image's own environment comes first and sealrun's variables win over it; LD_* and proxy
// variables in an image are refused.
func TestImageEnv(t *testing.T) {
	env := Env(Config{ImageEnv: []string{"PATH=/opt/bin:/bin", "SEALRUN_GATEWAY=http://elsewhere", "LANG=de_DE.UTF-8"}, Kind: "openai"})
	if env[0] != "PATH=/opt/bin:/bin" || env[1] != "SEALRUN_GATEWAY=http://elsewhere" {
		t.Fatalf("the image's environment is not first: %v", env)
	}
	last := map[string]string{}
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		last[k] = v
	}
	if last["SEALRUN_GATEWAY"] != GatewayURL(0) || last["PATH"] != "/opt/bin:/bin" {
		t.Errorf("the last word: %v", last)
	}
	for _, bad := range [][]string{{"LD_PRELOAD=/x.so"}, {"http_proxy=http://p:3128"}, {"NOEQUALS"}} {
		if err := CheckImageEnv(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if err := CheckImageEnv([]string{"PATH=/usr/bin", "PYTHONUNBUFFERED=1"}); err != nil {
		t.Error(err)
	}
}
