package exams

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/sealrun/sealrun/internal/fileio"
)

// Encode writes the canonical built exam of qs to w (see FORMAT.md) and returns its SHA-256 in
// lowercase hex: the exam hash. Prefixes are cut to their last contextBytes bytes, which is what
// the grader will send a model. The Family of each question is not written.
func Encode(w io.Writer, qs []Question, contextBytes int) (string, error) {
	if contextBytes < 1 || contextBytes > MaxContextBytes {
		return "", fmt.Errorf("encode exam: context bytes %d out of range; expected 1 to %d", contextBytes, MaxContextBytes)
	}
	if len(qs) == 0 {
		return "", fmt.Errorf("encode exam: no questions")
	}
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 256<<10)
	line := appendHeader(make([]byte, 0, 4096), Header{Format: Format, ContextBytes: contextBytes, Questions: len(qs)})
	for i := range qs {
		if _, err := bw.Write(line); err != nil {
			return "", fmt.Errorf("write exam: %w", err)
		}
		q := qs[i]
		q.Prefix = tail(q.Prefix, contextBytes)
		line = appendQuestion(line[:0], &q)
	}
	if _, err := bw.Write(line); err != nil {
		return "", fmt.Errorf("write exam: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return "", fmt.Errorf("write exam: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WriteFile builds the exam into path atomically: it is written to a temporary file in the same
// directory and renamed into place only when complete, so a failed build leaves no file (and an
// existing file at path is untouched). The file is made readable by its owner only, since a
// built exam is secret. It returns the exam hash.
func WriteFile(path string, qs []Question, contextBytes int) (string, error) {
	var sum string
	err := fileio.WriteAtomic(path, 0o600, func(w io.Writer) error {
		var err error
		sum, err = Encode(w, qs, contextBytes)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("build %s: %w", path, err)
	}
	return sum, nil
}

// HashFile returns the lowercase hex SHA-256 of the file at path, streaming: the same value as
// `sha256sum path`.
func HashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return "", fmt.Errorf("%s is a directory; give the built exam file", path)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(h, onlyReader{f}, buf); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// onlyReader hides WriterTo/ReaderFrom so io.CopyBuffer uses our large buffer.
type onlyReader struct{ io.Reader }
