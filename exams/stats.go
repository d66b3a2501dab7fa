package exams

import (
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strings"
	"unicode/utf8"
)

// Stats summarises an exam: counts, families and length histograms.
type Stats struct {
	Questions   int
	Families    map[string]int // empty when no input with families was given
	PrefixBytes Histogram
	AnswerBytes Histogram
	AnswerTotal int
}

// Histogram counts lengths in power-of-two buckets: bucket i holds lengths in (2^(i-1), 2^i].
type Histogram struct {
	Buckets  [32]int
	Min, Max int
}

func (h *Histogram) add(n int) {
	if h.Min == 0 || n < h.Min {
		h.Min = n
	}
	h.Max = max(h.Max, n)
	b := 0
	if n > 1 {
		b = bits.Len(uint(n - 1))
	}
	h.Buckets[min(b, len(h.Buckets)-1)]++
}

// ComputeStats summarises qs; families maps question id to family (from the input) and may be nil.
func ComputeStats(qs []Question, families map[string]string) Stats {
	s := Stats{Questions: len(qs), Families: map[string]int{}}
	for _, q := range qs {
		s.PrefixBytes.add(len(q.Prefix))
		s.AnswerBytes.add(len(q.Answer))
		s.AnswerTotal += len(q.Answer)
		if f := families[q.ID]; f != "" {
			s.Families[f]++
		} else if families != nil {
			s.Families["(not in input)"]++
		}
	}
	return s
}

// Write prints s for people.
func (s Stats) Write(w io.Writer) {
	fmt.Fprintf(w, "questions      %d\n", s.Questions)
	fmt.Fprintf(w, "answer bytes   %d in all, %d to %d each\n", s.AnswerTotal, s.AnswerBytes.Min, s.AnswerBytes.Max)
	fmt.Fprintf(w, "prefix bytes   %d to %d each\n", s.PrefixBytes.Min, s.PrefixBytes.Max)
	if len(s.Families) > 0 {
		names := make([]string, 0, len(s.Families))
		for f := range s.Families {
			names = append(names, f)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "families\n")
		for _, f := range names {
			fmt.Fprintf(w, "  %-14s %d\n", f, s.Families[f])
		}
	} else {
		fmt.Fprintf(w, "families       unknown (give the input with --documents or --questions)\n")
	}
	s.PrefixBytes.write(w, "prefix length")
	s.AnswerBytes.write(w, "answer length")
}

func (h Histogram) write(w io.Writer, title string) {
	fmt.Fprintf(w, "%s\n", title)
	most := 0
	for _, c := range h.Buckets {
		most = max(most, c)
	}
	for i, c := range h.Buckets {
		if c == 0 {
			continue
		}
		lo, hi := 1, 1
		if i > 0 {
			lo, hi = 1<<(i-1)+1, 1<<i
		}
		label := fmt.Sprintf("%d-%d", lo, hi)
		if lo == hi {
			label = fmt.Sprint(lo)
		}
		bar := strings.Repeat("#", max(1, c*40/most))
		fmt.Fprintf(w, "  %11s  %7d  %s\n", label, c, bar)
	}
}

// Printable renders bytes for a terminal: valid UTF-8 as is, newlines and tabs kept, other
// control characters and invalid bytes (such as a UTF-8 sequence cut by truncation) as \xNN.
func Printable(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&sb, `\x%02x`, b[0])
			n = 1
		case r == '\n' || r == '\t':
			sb.WriteRune(r)
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' || r == '\u202e':
			fmt.Fprintf(&sb, `\u%04x`, r)
		case r == '\\':
			sb.WriteString(`\\`)
		default:
			sb.WriteRune(r)
		}
		b = b[n:]
	}
	return sb.String()
}
