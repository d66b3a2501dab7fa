package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/api"
	"github.com/sealrun/sealrun/client"
	"github.com/sealrun/sealrun/sandbox"
)

// BenchmarkAttachEcho: keystroke-to-echo latency in a human run's shell, through what sealrun
// attach does (the admin socket, the frames, sealrund, the terminal, the runtime's relay), against
// runc exec -t into the same controller container (through script(1), which gives runc the
// terminal it needs). Each keystroke is one character into the shell's line editor, timed until
// its echo is back; p50 and p99 of 300 each. Also the recording's size per keystroke, and so per
// hour of a person typing 5 keys a second. Then the same keystrokes with a proctor watching, and
// the latency of a refusal (an attach by someone whose run it is not).
func BenchmarkAttachEcho(b *testing.B) {
	tb := newTestbed(b)
	tb.cfg.Socket = filepath.Join(tb.base, "sealrun.sock")
	tb.cfg.Group = "root"
	tb.trackTOML += "\n[human]\nstart = \"2m\"\n"
	d := startDaemon(b, tb, tb.executor())
	c := serveAPI(b, tb, d)
	ctx := context.Background()
	rec, err := c.Submit(ctx, api.RunRequest{Track: tb.trackTOML, TrackName: "bench.toml", Agent: "human/bench", Seed: 1, Person: &api.Person{Account: "root"}})
	if err != nil {
		b.Fatal(err)
	}
	var a *client.Attachment
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if a, err = c.Attach(ctx, rec.ID, false, 200, 50); err == nil {
			break
		} else if time.Now().After(deadline) {
			b.Fatal(err)
		}
	}
	defer a.Close()
	out := make(chan []byte, 1024)
	go func() {
		for {
			p, ended, err := a.Next()
			if err != nil || ended != "" {
				close(out)
				return
			}
			out <- p
		}
	}()
	waitOut := func(want string, timeout time.Duration) {
		var seen []byte
		t := time.After(timeout)
		for !bytes.Contains(seen, []byte(want)) {
			select {
			case p := <-out:
				seen = append(seen, p...)
			case <-t:
				b.Fatalf("no %q in %q", want, seen)
			}
		}
	}
	waitOut("[sealrun]", time.Minute)
	time.Sleep(300 * time.Millisecond)
	for len(out) > 0 {
		<-out
	}
	// A keystroke, and the time until output comes back: x, then a backspace, in turn (a line
	// that never grows).
	keys := func(send func([]byte) error, recv func() error, n int) []time.Duration {
		var lat []time.Duration
		for i := range n {
			k := []byte("x")
			if i%2 == 1 {
				k = []byte{0x7f}
			}
			t0 := time.Now()
			if err := send(k); err != nil {
				b.Fatal(err)
			}
			if err := recv(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			time.Sleep(2 * time.Millisecond)
		}
		return lat
	}
	recvAttach := func() error {
		select {
		case <-out:
			time.Sleep(time.Millisecond) // the rest of a multi-part echo
			for len(out) > 0 {
				<-out
			}
			return nil
		case <-time.After(5 * time.Second):
			return fmt.Errorf("no echo through attach")
		}
	}
	d.x.sessions.get(rec.ID).rec.Flush()
	cast0 := recordingBytes(b, d, rec.ID)
	b.ResetTimer()
	attach := keys(a.Input, recvAttach, 300)
	b.StopTimer()
	d.x.sessions.get(rec.ID).rec.Flush()
	cast1 := recordingBytes(b, d, rec.ID)

	// The same with a proctor watching (its terminal sent the shell's output, filtered).
	w, err := c.Attach(ctx, rec.ID, true, 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if _, ended, err := w.Next(); err != nil || ended != "" {
				return
			}
		}
	}()
	proctored := keys(a.Input, recvAttach, 300)
	w.Detach()
	<-watched
	w.Close()

	// A refusal: root, an operator, asks for another person's terminal (a run queued for the
	// account nobody; refused before its state matters) without --take-over, 200 times; each
	// answer whole (a 403, not_your_run), timed from the dial.
	other, err := c.Submit(ctx, api.RunRequest{Track: tb.trackTOML, TrackName: "bench.toml", Agent: "human/nobody", Seed: 1, Person: &api.Person{Account: "nobody"}})
	if err != nil {
		b.Fatal(err)
	}
	var refusals []time.Duration
	for range 200 {
		t0 := time.Now()
		if _, err := c.Attach(ctx, other.ID, false, 0, 0); !api.IsCode(err, api.CodeNotYourRun) {
			b.Fatalf("root's attach without --take-over: %v", err)
		}
		refusals = append(refusals, time.Since(t0))
	}

	// The baseline: runc exec -t into the same container, a shell in it typed into the same way.
	rt := tb.h.RuntimeFor(sandbox.RoleController)
	root := filepath.Join(tb.h.RunDir(), "runtime")
	if rt.Kind != sandbox.KindRunc {
		root = filepath.Join(tb.h.RunDir(), "runtime-"+rt.Kind)
	}
	cs, err := tb.h.ListContainers(ctx)
	if err != nil {
		b.Fatal(err)
	}
	id := ""
	for _, ct := range cs {
		if strings.Contains(ct.ID, rec.ID) && strings.Contains(ct.ID, "-controller-") {
			id = ct.ID
		}
	}
	if id == "" {
		b.Fatalf("no controller container of %s among %d", rec.ID, len(cs))
	}
	cmd := exec.Command("script", "-qfec", fmt.Sprintf("%s --root %s exec -t --env TERM=xterm --env PS1=E$ %s /bin/sh", rt.Path, root, id), "/dev/null")
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Write([]byte("exit\r")); in.Close(); cmd.Wait() }()
	eout := make(chan []byte, 1024)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := stdout.Read(buf)
			if n > 0 {
				eout <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				close(eout)
				return
			}
		}
	}()
	var seen []byte
	for deadline := time.After(30 * time.Second); !bytes.Contains(seen, []byte("E$")); {
		select {
		case p := <-eout:
			seen = append(seen, p...)
		case <-deadline:
			b.Fatalf("runc exec -t never showed its prompt: %q", seen)
		}
	}
	time.Sleep(300 * time.Millisecond)
	for len(eout) > 0 {
		<-eout
	}
	recvExec := func() error {
		select {
		case <-eout:
			time.Sleep(time.Millisecond)
			for len(eout) > 0 {
				<-eout
			}
			return nil
		case <-time.After(5 * time.Second):
			return fmt.Errorf("no echo through runc exec -t")
		}
	}
	bare := keys(func(p []byte) error { _, err := in.Write(p); return err }, recvExec, 300)
	pct := func(l []time.Duration, p float64) float64 {
		s := slices.Clone(l)
		slices.Sort(s)
		return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(attach, 0.5), "attach-p50-ms")
	b.ReportMetric(pct(attach, 0.99), "attach-p99-ms")
	b.ReportMetric(pct(proctored, 0.5), "proctored-p50-ms")
	b.ReportMetric(pct(proctored, 0.99), "proctored-p99-ms")
	b.ReportMetric(pct(refusals, 0.5), "refusal-p50-ms")
	b.ReportMetric(pct(refusals, 0.99), "refusal-p99-ms")
	b.ReportMetric(pct(bare, 0.5), "exec-p50-ms")
	b.ReportMetric(pct(bare, 0.99), "exec-p99-ms")
	// The recording: what 300 keystrokes and their echoes added, per keystroke, and an hour of
	// typing at 5 keys a second.
	perKey := float64(cast1-cast0) / 300
	b.ReportMetric(perKey, "recording-B/key")
	b.ReportMetric(perKey*5*3600/(1<<20), "recording-MiB/h-at-5-keys/s")
	a.Detach()
}

// recordingBytes is the size of a human run's recording so far (its kept segments, uncompressed).
func recordingBytes(b *testing.B, d *Daemon, id string) int64 {
	b.Helper()
	r, _ := d.Run(id)
	f, err := os.Open(filepath.Join(r.Dir, "audit.jsonl"))
	if err != nil {
		return 0
	}
	defer f.Close()
	data, _ := io.ReadAll(f)
	var n int64
	for _, l := range bytes.Split(data, []byte("\n")) {
		if bytes.Contains(l, []byte(`"kind":"terminal"`)) {
			var seg struct{ Bytes int64 }
			if err := json.Unmarshal(l, &seg); err == nil {
				n += seg.Bytes
			}
		}
	}
	return n
}
