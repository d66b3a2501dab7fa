package exams

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Families are the synthetic question families. Every answer depends on definitions given inside
// its own document, not on general English, so a model must use its context.
var Families = []string{"records", "vocabulary", "schedule", "list", "numeric", "symbolic", "extraction"}

// Document is one synthetic document: the documents input format of ReadDocuments.
type Document struct {
	ID      string   `json:"id"`
	Family  string   `json:"family"`
	Text    string   `json:"text"`
	Answers [][2]int `json:"answers"`
}

// Synthesize returns synthetic documents holding exactly count questions in total, the same for
// the same seed on every platform and Go version (the generator is SplitMix64, defined here).
// Families rotate document by document; each document holds 1 to 4 questions.
func Synthesize(seed uint64, count int) []Document {
	g := &gen{state: seed}
	var docs []Document
	for n := 0; count > 0; n++ {
		family := Families[n%len(Families)]
		want := min(count, 2+g.intn(3))
		d := g.document(family, want)
		d.ID = fmt.Sprintf("syn-%d-%d", seed, n+1)
		count -= len(d.Answers)
		docs = append(docs, d)
	}
	return docs
}

// WriteDocuments writes docs as JSONL (one document per line).
func WriteDocuments(w io.Writer, docs []Document) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i := range docs {
		if err := enc.Encode(&docs[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// gen is SplitMix64 plus the text builder of one document.
type gen struct {
	state uint64
	text  strings.Builder
	spans [][2]int
}

func (g *gen) next() uint64 {
	g.state += 0x9e3779b97f4a7c15
	z := g.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intn returns a number in [0, n). The modulo bias is irrelevant for test data.
func (g *gen) intn(n int) int { return int(g.next() % uint64(n)) }

func (g *gen) pick(list []string) string { return list[g.intn(len(list))] }

func (g *gen) say(format string, args ...any) { fmt.Fprintf(&g.text, format, args...) }

// answer appends s and records it as an answer span.
func (g *gen) answer(s string) {
	start := g.text.Len()
	g.text.WriteString(s)
	g.spans = append(g.spans, [2]int{start, g.text.Len()})
}

var (
	consonants = []string{"b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z"}
	vowels     = []string{"a", "e", "i", "o", "u"}
	meanings   = []string{"stone", "river", "lamp", "goat", "bread", "cloud", "knife", "rope", "boat", "salt", "wheel", "door"}
)

// word makes an invented word of 2 or 3 syllables: not English, so only the document defines it.
func (g *gen) word() string {
	var b strings.Builder
	for i := 0; i < 2+g.intn(2); i++ {
		b.WriteString(g.pick(consonants))
		b.WriteString(g.pick(vowels))
	}
	if g.intn(2) == 0 {
		b.WriteString(g.pick(consonants))
	}
	return b.String()
}

// title makes an invented capitalised name.
func (g *gen) title() string {
	w := g.word()
	return strings.ToUpper(w[:1]) + w[1:]
}

// words makes n distinct invented words.
func (g *gen) words(n int) []string {
	seen := map[string]bool{}
	var out []string
	for len(out) < n {
		if w := g.word(); !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

func (g *gen) document(family string, questions int) Document {
	g.text.Reset()
	g.spans = nil
	switch family {
	case "records":
		g.records(questions)
	case "vocabulary":
		g.vocabulary(questions)
	case "schedule":
		g.schedule(questions)
	case "list":
		g.list(questions)
	case "numeric":
		g.numeric(questions)
	case "symbolic":
		g.symbolic(questions)
	case "extraction":
		g.extraction(questions)
	}
	return Document{Family: family, Text: g.text.String(), Answers: g.spans}
}

// records: key-value records, then lookups of one field.
func (g *gen) records(q int) {
	fields := []string{"color", "size", "owner", "shelf", "grade"}
	names := g.words(q + 2)
	type rec map[string]string
	recs := make([]rec, len(names))
	g.say("Inventory records.\n")
	for i, n := range names {
		recs[i] = rec{"color": g.word(), "size": strconv.Itoa(1 + g.intn(99)), "owner": g.word(), "shelf": string(rune('A'+g.intn(26))) + strconv.Itoa(g.intn(10)), "grade": strconv.Itoa(g.intn(6))}
		g.say("record %s: color=%s; size=%s; owner=%s; shelf=%s; grade=%s\n", n, recs[i]["color"], recs[i]["size"], recs[i]["owner"], recs[i]["shelf"], recs[i]["grade"])
	}
	g.say("Lookups.\n")
	for i := 0; i < q; i++ {
		k := g.intn(len(names))
		f := g.pick(fields)
		g.say("%s.%s = ", names[k], f)
		g.answer(recs[k][f])
		g.say("\n")
	}
}

// vocabulary: invented words defined, then used in translation.
func (g *gen) vocabulary(q int) {
	ws := g.words(q + 2)
	mean := make([]string, len(ws))
	g.say("Glossary of the %s tongue:\n", g.word())
	for i, w := range ws {
		mean[i] = meanings[(g.intn(len(meanings))+i)%len(meanings)]
		g.say("  %s means %s\n", w, mean[i])
	}
	g.say("Translations:\n")
	for i := 0; i < q; i++ {
		k := g.intn(len(ws))
		g.say("  the old %s -> the old ", ws[k])
		g.answer(mean[k])
		g.say("\n")
	}
}

// schedule: events with start times and durations; the answer is the end time.
func (g *gen) schedule(q int) {
	g.say("Timetable of %s station.\n", g.word())
	t := 6*60 + g.intn(6*60)
	for i := 0; i < q; i++ {
		dur := 5 * (1 + g.intn(24))
		g.say("Train %s leaves at %02d:%02d and travels %d minutes, arriving at ", g.word(), t/60, t%60, dur)
		end := (t + dur) % (24 * 60)
		g.answer(fmt.Sprintf("%02d:%02d", end/60, end%60))
		g.say(".\n")
		t = (t + 5 + g.intn(90)) % (24 * 60)
	}
}

// list: a cycle of invented tokens, repeated; continue it.
func (g *gen) list(q int) {
	for i := 0; i < q; i++ {
		cycle := g.words(2 + g.intn(3))
		g.say("Chant %d: ", i+1)
		reps := 2 + g.intn(2)
		for r := 0; r < reps; r++ {
			g.say("%s ", strings.Join(cycle, " "))
		}
		cut := g.intn(len(cycle))
		if cut > 0 {
			g.say("%s ", strings.Join(cycle[:cut], " "))
		}
		g.answer(cycle[cut])
		g.say("\n")
	}
}

// numeric: arithmetic, geometric and Fibonacci-like sequences; the answer is the next term.
func (g *gen) numeric(q int) {
	for i := 0; i < q; i++ {
		var terms []int
		kind := g.intn(3)
		switch kind {
		case 0:
			a, d := g.intn(50), 1+g.intn(19)
			for k := 0; k < 6; k++ {
				terms = append(terms, a+k*d)
			}
		case 1:
			a, r := 1+g.intn(5), 2+g.intn(2)
			for k := 0; k < 6; k++ {
				terms = append(terms, a)
				a *= r
			}
		default:
			a, b := 1+g.intn(9), 1+g.intn(9)
			for k := 0; k < 6; k++ {
				terms = append(terms, a)
				a, b = b, a+b
			}
		}
		parts := make([]string, len(terms)-1)
		for k := range parts {
			parts[k] = strconv.Itoa(terms[k])
		}
		g.say("Series %s: %s, ", g.word(), strings.Join(parts, ", "))
		g.answer(strconv.Itoa(terms[len(terms)-1]))
		g.say("\n")
	}
}

// symbolic: a string transform shown on examples, then applied.
func (g *gen) symbolic(q int) {
	ops := []struct {
		name string
		f    func(string) string
	}{
		{"mirror", func(s string) string {
			b := []byte(s)
			for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
				b[i], b[j] = b[j], b[i]
			}
			return string(b)
		}},
		{"rotate", func(s string) string { return s[1:] + s[:1] }},
		{"shout", strings.ToUpper},
		{"twin", func(s string) string {
			if len(s) > 8 {
				s = s[:8]
			}
			var b strings.Builder
			for _, c := range s {
				b.WriteRune(c)
				b.WriteRune(c)
			}
			return b.String()
		}},
	}
	for i := 0; i < q; i++ {
		op := ops[g.intn(len(ops))]
		name := g.word()
		g.say("Rule %s is %s.\n", name, op.name)
		for k := 0; k < 2; k++ {
			w := g.word()
			g.say("%s(%s) = %s\n", name, w, op.f(w))
		}
		w := g.word()
		g.say("%s(%s) = ", name, w)
		g.answer(op.f(w))
		g.say("\n")
	}
}

// extraction: semi-structured records, then a field asked for in prose.
func (g *gen) extraction(q int) {
	type person struct{ first, last, id, city string }
	ps := make([]person, q+2)
	g.say("Registry extract\n")
	for i := range ps {
		ps[i] = person{g.title(), g.title(), strconv.Itoa(1000 + g.intn(9000)), g.word()}
		g.say("name: %s %s | id: %s | city: %s\n", ps[i].first, ps[i].last, ps[i].id, ps[i].city)
	}
	for i := 0; i < q; i++ {
		p := ps[g.intn(len(ps))]
		if g.intn(2) == 0 {
			g.say("The id of %s %s is ", p.first, p.last)
			g.answer(p.id)
		} else {
			g.say("%s %s lives in ", p.first, p.last)
			g.answer(p.city)
		}
		g.say(".\n")
	}
}
