package controller

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/internal/fileio"
)

// bodyFile keeps one body whole, gzip-compressed, as it passes: written to a hidden temporary
// file beside its name, then synced and renamed into place (Commit), so that a body under its
// name is always whole. The first error sticks; later writes are dropped.
type bodyFile struct {
	dir, name string
	f         *os.File
	zw        *gzip.Writer
	err       error
}

func newBodyFile(dir, name string) *bodyFile {
	b := &bodyFile{dir: dir, name: name}
	b.f, b.err = os.CreateTemp(dir, "."+name+".tmp-")
	if b.err == nil {
		b.zw = gzipPool.Get().(*gzip.Writer)
		b.zw.Reset(b.f)
	}
	return b
}

func (b *bodyFile) Write(p []byte) {
	if b.err == nil {
		_, b.err = b.zw.Write(p)
	}
}

// Commit closes the body and renames it into place, durably; on any error nothing is left.
func (b *bodyFile) Commit() error {
	if b.f == nil {
		return fmt.Errorf("keep %s: %w", filepath.Join(b.dir, b.name), b.err)
	}
	tmp := b.f.Name()
	err := b.err
	if err == nil {
		err = b.zw.Close()
	}
	gzipPool.Put(b.zw)
	if err == nil {
		err = b.f.Sync()
	}
	err = errors.Join(err, b.f.Close())
	if err == nil {
		err = os.Rename(tmp, filepath.Join(b.dir, b.name))
	}
	if err == nil {
		err = fileio.SyncDir(b.dir)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("keep %s: %w", filepath.Join(b.dir, b.name), err)
	}
	return nil
}

// gzipPool reuses compressors (each holds about a megabyte of tables).
var gzipPool = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed); return w }}

// maxUsageLine bounds one server-sent event line the usage reader looks at: a usage event is
// small, and a longer line (a large delta) is skipped rather than buffered.
const maxUsageLine = 1 << 20

// usageReader reads the token usage of a response as it passes: from the whole JSON body, or
// from the usage events of a server-sent event stream, line by line.
type usageReader struct {
	streamed bool
	buf      bytes.Buffer // the JSON body, or the current line of a stream
	skip     bool         // the current line is over maxUsageLine
	u        audit.Usage
}

func newUsageReader(streamed bool) *usageReader { return &usageReader{streamed: streamed} }

func (r *usageReader) Write(p []byte) {
	if !r.streamed {
		r.buf.Write(p)
		return
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !r.skip {
			if r.buf.Len()+len(chunk) > maxUsageLine {
				r.skip = true
				r.buf.Reset()
			} else {
				r.buf.Write(chunk)
			}
		}
		if i < 0 {
			return
		}
		if !r.skip {
			r.line(r.buf.Bytes())
		}
		r.buf.Reset()
		r.skip = false
		p = p[i+1:]
	}
}

func (r *usageReader) line(l []byte) {
	if data, ok := bytes.CutPrefix(bytes.TrimSpace(l), []byte("data:")); ok {
		readUsage(bytes.TrimSpace(data), &r.u)
	}
}

// result is the usage read: the whole body's, or the largest each count reached in the stream.
func (r *usageReader) result() audit.Usage {
	if !r.streamed {
		var u audit.Usage
		readUsage(r.buf.Bytes(), &u)
		return u
	}
	if r.buf.Len() > 0 && !r.skip {
		r.line(r.buf.Bytes()) // a last line without its newline
		r.buf.Reset()
	}
	return r.u
}

// parseUsage reads token usage from a JSON response or from the usage events of an SSE stream.
func parseUsage(body []byte, streamed bool) audit.Usage {
	r := newUsageReader(streamed)
	r.Write(body)
	return r.result()
}

// readUsage folds the usage of one JSON object (a response, or one event of a stream) into u:
// OpenAI's chat completions (prompt/completion tokens), its Responses API (input/output tokens,
// also inside a response.* event's response), Anthropic's messages (input/output tokens, also in
// message_start's message), Google's Gemini API (usageMetadata).
func readUsage(b []byte, u *audit.Usage) {
	var v struct {
		Usage *struct {
			PromptTokens            int64 `json:"prompt_tokens"`
			CompletionTokens        int64 `json:"completion_tokens"`
			InputTokens             int64 `json:"input_tokens"`
			OutputTokens            int64 `json:"output_tokens"`
			CompletionTokensDetails struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
			OutputTokensDetails struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			} `json:"output_tokens_details"`
			PromptTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"` // openai chat
			InputTokensDetails struct {
				CachedTokens int64 `json:"cached_tokens"`
			} `json:"input_tokens_details"` // openai responses
			CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`     // anthropic: not in its input_tokens
			CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"` // anthropic: not in its input_tokens
		} `json:"usage"`
		Message       *struct{ Usage json.RawMessage } `json:"message"`  // anthropic message_start
		Response      *struct{ Usage json.RawMessage } `json:"response"` // openai responses stream
		UsageMetadata *struct {                        // google
			PromptTokenCount        int64 `json:"promptTokenCount"`
			CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
			ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
			CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		} `json:"usageMetadata"`
	}
	if json.Unmarshal(b, &v) != nil {
		return
	}
	if x := v.UsageMetadata; x != nil {
		// Gemini counts thoughts apart from the candidates; both are output.
		u.Prompt = max(u.Prompt, x.PromptTokenCount)
		u.Completion = max(u.Completion, x.CandidatesTokenCount+x.ThoughtsTokenCount)
		u.Reasoning = max(u.Reasoning, x.ThoughtsTokenCount)
		u.CachedPrompt = max(u.CachedPrompt, x.CachedContentTokenCount)
		return
	}
	if v.Usage == nil && v.Message != nil && len(v.Message.Usage) > 0 {
		readUsage([]byte(`{"usage":`+string(v.Message.Usage)+`}`), u)
		return
	}
	if v.Usage == nil && v.Response != nil && len(v.Response.Usage) > 0 {
		readUsage([]byte(`{"usage":`+string(v.Response.Usage)+`}`), u)
		return
	}
	if v.Usage == nil {
		return
	}
	x := v.Usage
	// Anthropic counts cache reads and writes apart from input_tokens; OpenAI counts its cached
	// tokens inside prompt_tokens (input_tokens). Prompt is every input token either way.
	u.Prompt = max(u.Prompt, x.PromptTokens+x.InputTokens+x.CacheReadInputTokens+x.CacheCreationInputTokens)
	u.CachedPrompt = max(u.CachedPrompt, x.PromptTokensDetails.CachedTokens+x.InputTokensDetails.CachedTokens+x.CacheReadInputTokens)
	u.CacheWrite = max(u.CacheWrite, x.CacheCreationInputTokens)
	u.Completion = max(u.Completion, x.CompletionTokens+x.OutputTokens)
	u.Reasoning = max(u.Reasoning, x.CompletionTokensDetails.ReasoningTokens+x.OutputTokensDetails.ReasoningTokens)
}
