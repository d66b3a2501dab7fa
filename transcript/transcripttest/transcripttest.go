// Package transcripttest writes run directories for tests and benchmarks of transcripts: an
// audit log chained as the daemon chains it, gateway bodies kept as the gateway keeps them
// (gzip, named by request) and call logs, with the entries' hashes of exactly those bytes. A
// synthetic agent loop (Conversation) makes runs of any size: the shape of a scaffold that
// resends the whole history each turn.
package transcripttest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/digest"
)

// Run is a run directory being written.
type Run struct {
	Dir   string
	Start time.Time
	Now   time.Time // the time of the next entry; each entry moves it on
	log   *audit.Log
	n     int // gateway requests
	calls int
	zw    *gzip.Writer // bodies at the gateway's level (BestSpeed)
}

// New starts a run directory in dir (created) whose clock starts at start.
func New(dir string, start time.Time) (*Run, error) {
	for _, d := range []string{dir, filepath.Join(dir, audit.GatewayDir), filepath.Join(dir, audit.CallsDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	l, err := audit.Open(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return nil, err
	}
	zw, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return &Run{Dir: dir, Start: start, Now: start.Add(2 * time.Second), log: l, zw: zw}, nil
}

// Close closes the audit log.
func (r *Run) Close() error { return r.log.Close() }

// Head is the audit log's head and entry count.
func (r *Run) Head() (string, int) { return r.log.Head() }

// Log is the run's audit log, for a writer of entries this package does not make (a human run's
// recording, controller.Recording).
func (r *Run) Log() *audit.Log { return r.log }

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func (r *Run) keep(rel string, b []byte) error {
	var buf bytes.Buffer
	r.zw.Reset(&buf)
	r.zw.Write(b)
	r.zw.Close()
	return os.WriteFile(filepath.Join(r.Dir, filepath.FromSlash(rel)), buf.Bytes(), 0o644)
}

// Exchange records one model request through the gateway: its bodies kept, its entry
// appended. A status of 0 is 200.
func (r *Run) Exchange(path string, req, resp []byte, streamed bool, status int) error {
	r.n++
	if status == 0 {
		status = 200
	}
	if err := r.keep(audit.GatewayBodyPath(r.n, audit.BodyRequest), req); err != nil {
		return err
	}
	if err := r.keep(audit.GatewayBodyPath(r.n, audit.BodyResponse), resp); err != nil {
		return err
	}
	_, _, err := r.log.Append(audit.KindGateway, audit.Gateway{
		Request: r.n, Time: r.Now.UTC(), Method: "POST", Path: path, Model: "m", Status: status,
		Tries: []audit.Try{{Status: status, LatencyMS: 900}}, LatencyMS: 900,
		RequestBytes: int64(len(req)), RequestSHA256: digest.Hex(sum(req)), ResponseBytes: int64(len(resp)), ResponseSHA256: digest.Hex(sum(resp)),
		Streamed: streamed, Usage: audit.Usage{Prompt: int64(len(req) / 4), Completion: int64(len(resp) / 4)}})
	r.Now = r.Now.Add(time.Second)
	return err
}

// Call records one compute call with its output kept whole.
func (r *Run) Call(argv []string, output []byte, exit int) error {
	r.calls++
	if err := os.WriteFile(filepath.Join(r.Dir, filepath.FromSlash(audit.CallLogPath(r.calls))), output, 0o644); err != nil {
		return err
	}
	end := r.Now.Add(3 * time.Second)
	_, _, err := r.log.Append(audit.KindCall, audit.Call{
		Call: r.calls, Argv: argv, Cwd: "/workspace", EnvKeys: []string{}, Start: r.Now.UTC(), End: end.UTC(),
		StartOffset: r.Now.Sub(r.Start).String(), EndOffset: end.Sub(r.Start).String(), Limit: "10m0s", Status: audit.CallExited,
		Exit: exit, OutputBytes: int64(len(output)), OutputSHA256: digest.Hex(sum(output)), CPUSeconds: 2.5, MemoryPeak: 1 << 28,
		Container: fmt.Sprintf("c-%d", r.calls)})
	r.Now = end.Add(time.Second)
	return err
}

// Record appends body (one of package audit's records, its time as the caller set it) as an
// entry of kind, and moves Now on by a second.
func (r *Run) Record(kind string, body any) error {
	_, _, err := r.log.Append(kind, body)
	r.Now = r.Now.Add(time.Second)
	return err
}

// Entry appends an entry of another kind (submit, validation, promote, ...) at Now.
func (r *Run) Entry(kind string, body map[string]any) error {
	body["time"] = r.Now.UTC()
	_, _, err := r.log.Append(kind, body)
	r.Now = r.Now.Add(time.Second)
	return err
}

// Conversation makes a synthetic agent loop of turns model turns through the OpenAI chat
// completions API: each request the whole conversation so far (a system prompt of about
// systemBytes, the task, then every assistant tool call and its result), each answer one bash
// tool call, each call's output (resultBytes, made by out for turn i, or filler) both a compute
// call and the tool result the next request carries. Every tenth answer is streamed.
func Conversation(r *Run, turns, systemBytes, resultBytes int, out func(turn int) string) error {
	return Window(r, turns, 0, systemBytes, resultBytes, out)
}

// Window is Conversation by a scaffold that keeps, after the system prompt and the task, only
// its last window turns (0: all of them), as scaffolds that condense their history do.
func Window(r *Run, turns, window, systemBytes, resultBytes int, out func(turn int) string) error {
	type m = map[string]any
	msgs := []m{
		{"role": "system", "content": "You are a careful ML engineer. " + strings.Repeat("Follow the rules of the sealed run. ", systemBytes/36)},
		{"role": "user", "content": "Train the best small language model you can in the hour; submit with runner submit."},
	}
	tools := []m{{"type": "function", "function": m{"name": "bash", "parameters": m{"type": "object"}}}}
	for i := 1; i <= turns; i++ {
		sent := msgs
		if window > 0 && len(msgs) > 2+2*window {
			sent = append(append([]m{}, msgs[:2]...), msgs[len(msgs)-2*window:]...)
		}
		req, _ := json.Marshal(m{"model": "m", "messages": sent, "tools": tools, "stream": i%10 == 0})
		cmd := fmt.Sprintf("runner python3 train.py --step %d", i)
		args, _ := json.Marshal(m{"command": cmd})
		id := fmt.Sprintf("call_%d", i)
		var resp []byte
		streamed := i%10 == 0
		if streamed {
			var b strings.Builder
			for _, ev := range []m{
				{"choices": []m{{"index": 0, "delta": m{"role": "assistant", "content": fmt.Sprintf("Turn %d: I will run the next step.", i)}}}},
				{"choices": []m{{"index": 0, "delta": m{"tool_calls": []m{{"index": 0, "id": id, "type": "function", "function": m{"name": "bash", "arguments": ""}}}}}}},
				{"choices": []m{{"index": 0, "delta": m{"tool_calls": []m{{"index": 0, "function": m{"arguments": string(args)}}}}}}},
				{"choices": []m{{"index": 0, "delta": m{}, "finish_reason": "tool_calls"}}, "usage": m{"prompt_tokens": len(req) / 4, "completion_tokens": 20}},
			} {
				j, _ := json.Marshal(ev)
				fmt.Fprintf(&b, "data: %s\n\n", j)
			}
			b.WriteString("data: [DONE]\n\n")
			resp = []byte(b.String())
		} else {
			resp, _ = json.Marshal(m{"id": fmt.Sprintf("chatcmpl-%d", i), "object": "chat.completion", "choices": []m{{"index": 0, "finish_reason": "tool_calls",
				"message": m{"role": "assistant", "content": fmt.Sprintf("Turn %d: I will run the next step.", i), "tool_calls": []m{{"id": id, "type": "function", "function": m{"name": "bash", "arguments": string(args)}}}}}},
				"usage": m{"prompt_tokens": len(req) / 4, "completion_tokens": 20}})
		}
		if err := r.Exchange("/v1/chat/completions", req, resp, streamed, 200); err != nil {
			return err
		}
		text := ""
		if out != nil {
			text = out(i)
		}
		if len(text) < resultBytes {
			line := fmt.Sprintf("step %d loss %.3f\n", i, 3.0/float64(i))
			text += strings.Repeat(line, (resultBytes-len(text))/len(line)+1)[:resultBytes-len(text)]
		}
		if err := r.Call([]string{"python3", "train.py", "--step", fmt.Sprint(i)}, []byte(text), 0); err != nil {
			return err
		}
		msgs = append(msgs, m{"role": "assistant", "content": fmt.Sprintf("Turn %d: I will run the next step.", i), "tool_calls": []m{{"id": id, "type": "function", "function": m{"name": "bash", "arguments": string(args)}}}},
			m{"role": "tool", "tool_call_id": id, "content": text})
	}
	return nil
}

// ReadGzip reads a gzip file whole, as a test reads a kept body.
func ReadGzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

// WriteGzip writes b as a gzip file, as a test replaces a kept body.
func WriteGzip(path string, b []byte) error {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// Recording reads a human run's terminal recording back from its run directory: the segments its
// audit log's terminal entries name, in order, each checked against its entry's size and hash,
// joined; and the log's attach entries.
func Recording(dir string) (cast []byte, segments []audit.Terminal, attaches []audit.Attach, err error) {
	log, err := os.ReadFile(filepath.Join(dir, "audit.jsonl"))
	if err != nil {
		return nil, nil, nil, err
	}
	for _, line := range bytes.Split(log, []byte("\n")) {
		var env audit.Entry
		if json.Unmarshal(line, &env) != nil {
			continue
		}
		switch env.Kind {
		case audit.KindAttach:
			var a audit.Attach
			if err := json.Unmarshal(line, &a); err != nil {
				return nil, nil, nil, err
			}
			attaches = append(attaches, a)
		case audit.KindTerminal:
			var r audit.Terminal
			if err := json.Unmarshal(line, &r); err != nil {
				return nil, nil, nil, err
			}
			if r.Segment != len(segments)+1 {
				return nil, nil, nil, fmt.Errorf("terminal segment %d follows %d", r.Segment, len(segments))
			}
			gz, err := os.ReadFile(filepath.Join(dir, audit.TerminalSegmentPath(r.Segment)))
			if err != nil {
				return nil, nil, nil, err
			}
			zr, err := gzip.NewReader(bytes.NewReader(gz))
			if err != nil {
				return nil, nil, nil, fmt.Errorf("terminal segment %d: %w", r.Segment, err)
			}
			body, err := io.ReadAll(zr)
			if err != nil {
				return nil, nil, nil, fmt.Errorf("terminal segment %d: %w", r.Segment, err)
			}
			if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != string(r.SHA256) || int64(len(body)) != r.Bytes {
				return nil, nil, nil, fmt.Errorf("terminal segment %d: %d bytes, not the %d with sha256 %s its entry names", r.Segment, len(body), r.Bytes, r.SHA256)
			}
			segments = append(segments, r)
			cast = append(cast, body...)
		}
	}
	return cast, segments, attaches, nil
}
