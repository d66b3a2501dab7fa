package leaderboard

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sealrun/sealrun/policy"
)

// Formats are the output formats.
var Formats = []string{"text", "markdown", "html", "json", "csv"}

// Render writes the board in format.
func (b *Board) Render(w io.Writer, format string) error {
	switch format {
	case "text":
		return b.text(w, false)
	case "markdown":
		return b.text(w, true)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(b)
	case "csv":
		return b.csv(w)
	case "html":
		return b.html(w)
	}
	return fmt.Errorf("unknown format %q; use one of %s", format, strings.Join(Formats, ", "))
}

func rankText(r *Row) string {
	switch {
	case r.Rank == 0:
		return "-"
	case r.Tied:
		return "=" + strconv.Itoa(r.Rank)
	}
	return strconv.Itoa(r.Rank)
}

func optText(v *float64, decimals int) string {
	if v == nil {
		return "—"
	}
	return strconv.FormatFloat(RoundHalfAway(*v, decimals), 'f', decimals, 64)
}

func (r *Row) flags() string {
	var f []string
	if r.N == 0 {
		f = append(f, "no valid run")
	} else if r.Provisional {
		f = append(f, "provisional")
	} else {
		f = append(f, "official")
	}
	if r.N < 2 {
		f = append(f, "repeatability not tested")
	}
	if p := r.Pauses; p != nil {
		n := fmt.Sprintf("%d pauses", p.Count)
		if p.Count == 1 {
			n = "1 pause"
		}
		f = append(f, fmt.Sprintf("%s granted, %s in all", n, time.Duration(p.Seconds*float64(time.Second)).Round(time.Second)))
	}
	return strings.Join(f, ", ")
}

// AmendedRuns are the row's runs, valid and invalid, that have amendments, by id.
func (r *Row) AmendedRuns() []Run {
	var out []Run
	for _, run := range r.Runs {
		if len(run.Amendments) > 0 {
			out = append(out, run)
		}
	}
	for _, i := range r.Invalid {
		if len(i.Amendments) > 0 {
			out = append(out, i.Run)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// TrackTitle is a table's heading.
func (t *Table) TrackTitle() string {
	return fmt.Sprintf("%s %s (%s)", t.Track.Name, t.Track.Version, t.Track.Status)
}

// columns are every table's columns, in order.
var columns = []string{"rank", "agent", "score % (mean ± SE)", "seeds", "status", "failed", "invalid (reruns)", "best validation %", "bits/byte", "cost per run (mean ± SE)", "signed by"}

func (r *Row) cells() []string {
	score := r.MeanText()
	if r.N > 0 {
		score += " ± " + r.SEText()
	}
	var inv []string
	for _, i := range r.Invalid {
		s := i.ID
		if len(i.Reruns) > 0 {
			s += " → " + strings.Join(i.Reruns, ", ")
		} else {
			s += " → rerun pending"
		}
		inv = append(inv, s)
	}
	invText := "0"
	if len(inv) > 0 {
		invText = fmt.Sprintf("%d (%s)", len(inv), strings.Join(inv, "; "))
	}
	return []string{rankText(r), r.Agent.Name(), score, fmt.Sprintf("%d/%d", r.N, r.Required), r.flags(), strconv.Itoa(r.Failed), invText, optText(r.Validation, 1), optText(r.BitsPerByte, 3),
		r.CostText(), strings.Join(r.SignedBy, ", ")}
}

// CostText is the row's mean cost per run ± SE and its currency, "—" without one.
func (r *Row) CostText() string {
	c := r.Cost
	if c == nil {
		return "—"
	}
	se := "—"
	if c.SE != nil {
		se = policy.FormatMoney(*c.SE)
	}
	return policy.FormatMoney(c.Mean) + " ± " + se + " " + c.Currency
}

// text writes the board as plain text or Markdown (md): the tables, the rejected inputs, the
// ledgers, the rules. It is long because it is the board's sections in the order FORMAT.md gives
// them.
func (b *Board) text(w io.Writer, md bool) error {
	bw := &errWriter{w: w}
	if len(b.Tables) == 0 {
		bw.printf("No verified attestation: nothing to rank.\n")
	}
	for ti := range b.Tables {
		t := &b.Tables[ti]
		if md {
			bw.printf("## %s\n\n", t.TrackTitle())
			bw.printf("Track id `%s` · %d questions · official rows need %d valid seeds\n\n", t.Track.ID, t.Questions, t.SeedsRequired)
		} else {
			bw.printf("%s — track id %s\n", t.TrackTitle(), t.Track.ID)
			bw.printf("%d questions; official rows need %d valid seeds\n", t.Questions, t.SeedsRequired)
		}
		for _, warn := range t.Warnings {
			if md {
				bw.printf("> **%s**\n\n", warn)
			} else {
				bw.printf("NOTE: %s\n", warn)
			}
		}
		rows := [][]string{columns}
		for i := range t.Rows {
			rows = append(rows, t.Rows[i].cells())
		}
		if md {
			for i, r := range rows {
				for j := range r {
					r[j] = strings.ReplaceAll(r[j], "|", `\|`)
				}
				bw.printf("| %s |\n", strings.Join(r, " | "))
				if i == 0 {
					bw.printf("|%s\n", strings.Repeat("---|", len(r)))
				}
			}
			bw.printf("\n")
		} else {
			writeAligned(bw, rows)
			bw.printf("\n")
		}
		repeat := 0
		for _, r := range t.Rows {
			if r.N >= 2 {
				repeat++
			}
		}
		for _, r := range t.Rows {
			if r.TestBuild {
				bw.printf("TEST BUILD: %s came from a test build of sealrund (test seams compiled in), not a release.\n", r.Agent.Name())
			}
			if r.Ledger != nil {
				bw.printf("Ledger: %s: %s\n", r.Agent.Name(), r.Ledger.Text())
			}
			for _, run := range r.AmendedRuns() {
				for _, a := range run.Amendments {
					bw.printf("Amended: %s, %s (seed %d): %s\n", r.Agent.Name(), run.ID, run.Seed, a.Text())
				}
			}
		}
		bw.printf("Repeatability tested (2 or more valid seeds) for %d of %d rows.\n\n", repeat, len(t.Rows))
	}
	if len(b.Rejected) > 0 {
		head := "Rejected (not counted)"
		if md {
			bw.printf("### %s\n\n", head)
		} else {
			bw.printf("%s:\n", head)
		}
		for _, r := range b.Rejected {
			bw.printf("- %s: %s\n", r.Path, r.Reason)
		}
		bw.printf("\n")
	}
	if len(b.Unpublished) > 0 {
		bw.printf("In the run ledgers but on no row (every attestation of the agent withheld):\n")
		for _, u := range b.Unpublished {
			bw.printf("- %s\n", u)
		}
		bw.printf("\n")
	}
	if len(b.Skipped) > 0 {
		bw.printf("Skipped: %d files that are not attestations or repeat one (--format json lists them).\n\n", len(b.Skipped))
	}
	if md {
		bw.printf("### Rules\n\n")
	} else {
		bw.printf("Rules:\n")
	}
	for _, r := range b.Rules {
		bw.printf("- %s\n", r)
	}
	var keys []string
	for _, k := range b.Keys {
		keys = append(keys, fmt.Sprintf("%s (%s)", k.Name, shortID(k.KeyID)))
	}
	bw.printf("\nTrusted keys: %s\n", strings.Join(keys, ", "))
	for _, l := range b.Ledgers {
		bw.printf("Run ledger: %s (%s, %d entries)\n", l.Origin, l.Name, l.Size)
	}
	return bw.err
}

// writeAligned prints rows as space-aligned columns (widths in runes).
func writeAligned(w *errWriter, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len([]rune(c))+2))
			}
		}
		w.printf("%s\n", strings.TrimRight(b.String(), " "))
	}
}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// CSVHeader are the csv columns (FORMAT.md).
var CSVHeader = []string{"track_id", "track_name", "track_version", "track_status", "rank", "tied", "scaffold", "scaffold_version", "model", "reasoning_effort",
	"valid_seeds", "required_seeds", "provisional", "mean_pct", "mean_fraction", "se_pct", "failed", "invalid", "best_validation_pct", "bits_per_byte", "signed_by", "cost_mean", "cost_se", "currency"}

func (b *Board) csv(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(CSVHeader)
	for _, t := range b.Tables {
		for i := range t.Rows {
			r := &t.Rows[i]
			rank := ""
			if r.Rank > 0 {
				rank = strconv.Itoa(r.Rank)
			}
			mean, se := "", ""
			if r.N > 0 {
				mean = r.MeanText()
			}
			if r.SEPct != nil {
				se = r.SEText()
			}
			opt := func(v *float64, d int) string {
				if v == nil {
					return ""
				}
				return optText(v, d)
			}
			cost, costSE, cur := "", "", ""
			if c := r.Cost; c != nil {
				cost, cur = policy.FormatMoney(c.Mean), c.Currency
				if c.SE != nil {
					costSE = policy.FormatMoney(*c.SE)
				}
			}
			cw.Write([]string{t.Track.ID, t.Track.Name, t.Track.Version, t.Track.Status, rank, strconv.FormatBool(r.Tied), r.Agent.Scaffold, r.Agent.ScaffoldVersion,
				r.Agent.Model, r.Agent.Effort, strconv.Itoa(r.N), strconv.FormatInt(r.Required, 10), strconv.FormatBool(r.Provisional), mean, r.MeanExact, se,
				strconv.Itoa(r.Failed), strconv.Itoa(len(r.Invalid)), opt(r.Validation, 1), opt(r.BitsPerByte, 3), strings.Join(r.SignedBy, " "), cost, costSE, cur})
		}
	}
	cw.Flush()
	return cw.Error()
}
