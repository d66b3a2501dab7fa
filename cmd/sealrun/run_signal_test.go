package main

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A job a scheduler stops gets Slurm's SIGTERM in every process, sealrun run's included, possibly
// while sealrun run is asking sealrund for the run. It must still print the run's id (the job
// script cancels the run by it): here sealrund's answer to POST /runs comes only after the
// signal, and the id is printed all the same. Stopped before it asked, it asks nothing.
func TestRunPrintsItsIDWhenStoppedWhileAsking(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "sealrund.sock")
	track := filepath.Join(dir, "track.toml")
	os.WriteFile(track, []byte("# any track: the daemon reads it\n"), 0o644)
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan struct{}, 1)
	answer := make(chan struct{})
	var posts atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/v1/runs" {
			posts.Add(1)
			asked <- struct{}{}
			<-answer
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"r-20261127-101500-a1b2c3","state":"queued"}`))
			return
		}
		<-r.Context().Done() // following the run: until the client goes
	})}
	go srv.Serve(l)
	defer srv.Close()

	cmd := exec.Command(bin, "run", "--socket", sock, "--track", track, "--agent", "openai/gpt-x", "--seed", "6", "--wait", "--dispatcher", "slurm job 7_6")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("sealrun run never asked for the run: %s", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGTERM)
	time.Sleep(300 * time.Millisecond) // the signal is in before the answer
	close(answer)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("sealrun run did not end after the signal")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Errorf("sealrun run stopped by SIGTERM: %v; want a non-zero exit", err)
	}
	if first, _, _ := strings.Cut(stdout.String(), "\n"); first != "r-20261127-101500-a1b2c3" {
		t.Errorf("stopped while asking, sealrun run printed %q (stderr %q); want the run's id first", stdout.String(), stderr.String())
	}
	if posts.Load() != 1 {
		t.Errorf("%d POST /runs; want 1", posts.Load())
	}
}
