package transcript

// report.html: a run's page of its result and timeline, made from its signed predicate and its
// audit log alone, so that a reader regenerates it byte for byte (verify.Publication does) and the
// daemon writes the same at the run's end.

import (
	"bufio"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/internal/fileio"
	"github.com/sealrun/sealrun/policy"
)

// timelineItem is one thing of the run on the report's time axis.
type timelineItem struct {
	Kind         string // call, gateway, submit, validation, promote, finalize, sealed, refused
	Start, End   time.Duration
	Label        string
	Detail       string
	Score        *float64
	Failed       bool
	X, X2, Y, W  float64
	ScoreY       float64
	HasScore     bool
	IsCall       bool
	IsGateway    bool
	IsSubmission bool
}

// Offset is the item's start, rounded for reading.
func (t timelineItem) Offset() string {
	if t.Start < time.Second {
		return t.Start.Round(time.Millisecond).String()
	}
	return t.Start.Round(100 * time.Millisecond).String()
}

// RunReport is what report.html shows.
type RunReport struct {
	ID, Track, Agent, Status, Reason string
	Seed                             int64
	Passed, Questions                int
	Metric                           string // a task run's result in words (replaces passed/questions)
	Started, Deadline, Finished      time.Time
	Items                            []timelineItem
	Calls, Requests, Submissions     int
	Tokens                           int64
	Usage                            *policy.Usage // the attested usage and cost, when known
	Width, Height                    int
	Ticks                            []reportTick
	ValPath                          string
}

// TokensText is the run's tokens, and their cost where the host priced its model.
func (r RunReport) TokensText() string {
	u := r.Usage
	if u == nil {
		return fmt.Sprintf("%d tokens", r.Tokens)
	}
	t := u.Tokens
	s := fmt.Sprintf("%d tokens: %d in, %d of them cached, %d out, %d of them reasoning", t.Total(), t.Input, t.CachedInput, t.Output, t.Reasoning)
	if c := u.Cost; c != nil {
		s += fmt.Sprintf("; cost %s %s at the prices of %s", policy.FormatMoney(c.Amount), c.Price.Currency, c.Price.Taken)
	}
	return s
}

type reportTick struct {
	X     float64
	Label string
}

const (
	repLeft  = 110.0
	repWidth = 760.0
)

// RunPageFile is a run's page of its result and timeline, beside its transcript.
const RunPageFile = "report.html"

// ReportOf is what report.html shows of the run p attests (its audit log's part is added by
// RunPage). Times are UTC, as the predicate's are: the page is the same on every machine.
func ReportOf(p *attest.Predicate) RunReport {
	tl := p.Timeline
	return RunReport{ID: p.Run.ID, Track: p.Track.Name + " " + p.Track.Version, Agent: p.LedgerAgent(), Seed: p.Seed,
		Status: string(p.Result.Status), Reason: p.Result.Reason, Passed: p.Result.Passed, Questions: p.Result.Questions, Metric: p.MetricText(),
		Started: tl.Started.UTC(), Deadline: tl.Deadline.UTC(), Finished: tl.Finished.UTC(), Usage: p.Usage}
}

// RunPage is report.html of the run p attests, whose directory dir holds its audit log (none: a
// page without a timeline): a timeline of compute calls, gateway requests and submissions (with
// their validation scores), and the result. It is one self-contained page, readable without
// JavaScript, and the same bytes wherever it is made from the same predicate and log.
func RunPage(dir string, p *attest.Predicate) ([]byte, error) {
	if dir == "" {
		dir = "." // os.DirFS("") would be the root
	}
	return RunPageFS(os.DirFS(dir), p)
}

// RunPageFS is RunPage of the run directory whose files fsys holds.
func RunPageFS(fsys fs.FS, p *attest.Predicate) ([]byte, error) {
	r := ReportOf(p)
	f, err := fsys.Open("audit.jsonl")
	if err == nil {
		readAudit(f, &r)
		f.Close()
	}
	var b strings.Builder
	if err := render(&b, r); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// WriteRunPage writes RunPage's page to dir/report.html, atomically.
func WriteRunPage(dir string, p *attest.Predicate) error {
	b, err := RunPage(dir, p)
	if err != nil {
		return err
	}
	return fileio.WriteFile(filepath.Join(dir, RunPageFile), b, 0o644)
}

func render(w io.Writer, r RunReport) error {
	span := r.Deadline.Sub(r.Started)
	if end := r.Finished.Sub(r.Started); end > span {
		span = end
	}
	if span <= 0 {
		span = time.Second
	}
	x := func(d time.Duration) float64 { return repLeft + repWidth*float64(max(0, d))/float64(span) }
	lanes := map[string]float64{"call": 30, "gateway": 60, "submit": 90, "validation": 90, "refused": 90, "promote": 120, "finalize": 120, "sealed": 120}
	var path []string
	for i := range r.Items {
		it := &r.Items[i]
		it.X, it.X2, it.Y = x(it.Start), x(it.End), lanes[it.Kind]
		it.W = max(2, it.X2-it.X)
		it.IsCall, it.IsGateway = it.Kind == "call", it.Kind == "gateway"
		it.IsSubmission = it.Kind == "submit" || it.Kind == "refused" || it.Kind == "promote" || it.Kind == "finalize" || it.Kind == "sealed"
		if it.Score != nil {
			it.HasScore = true
			it.ScoreY = 250 - 1.0*(*it.Score)
			path = append(path, fmt.Sprintf("%.1f,%.1f", it.X, it.ScoreY))
		}
	}
	if len(path) > 0 {
		r.ValPath = "M" + strings.Join(path, " L")
	}
	for i := 0; i <= 6; i++ {
		d := span * time.Duration(i) / 6
		r.Ticks = append(r.Ticks, reportTick{X: x(d), Label: "+" + d.Round(time.Second).String()})
	}
	r.Width, r.Height = int(repLeft+repWidth+30), 290
	return reportPage.Execute(w, r)
}

func readAudit(rd io.Reader, r *RunReport) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, readSize(rd)), 1<<20)
	var gwStart time.Time
	for sc.Scan() {
		kind, rec, err := audit.ParseRecord(sc.Bytes())
		if err != nil || rec == nil {
			continue
		}
		it := timelineItem{Kind: kind}
		var at time.Time // a point's time (calls and requests have a span)
		switch e := rec.(type) {
		case *audit.Call:
			r.Calls++
			it.Start, it.End = e.Start.Sub(r.Started), e.End.Sub(r.Started)
			it.Label = fmt.Sprintf("call %d", e.Call)
			it.Detail = callText(e, strings.Join(e.Argv, " "), e.End.Sub(e.Start).Round(time.Millisecond))
			it.Failed = e.Exit != 0
		case *audit.Gateway:
			r.Requests++
			r.Tokens += e.Usage.Prompt + e.Usage.Completion
			gwStart = e.Time.Add(-time.Duration(e.LatencyMS) * time.Millisecond)
			it.Start, it.End = gwStart.Sub(r.Started), e.Time.Sub(r.Started)
			it.Detail = fmt.Sprintf("%s %s %d, %d ms", e.Path, e.Model, e.Status, e.LatencyMS)
			it.Failed = e.Status >= 400
		case *audit.Submit:
			r.Submissions++
			it.Detail, at = submitText(e), e.Time
		case *audit.Validation:
			s := 0.0
			if e.Questions > 0 {
				s = 100 * float64(deref(e.Passed)) / float64(e.Questions)
			}
			it.Score = &s
			it.Detail, at = validationText(e), e.Time
		case *audit.SubmitRefused:
			it.Kind = "refused"
			it.Detail, at = "refused: "+e.Reason, e.Time
			it.Failed = true
		case *audit.Promote:
			it.Detail, at = kind+" "+e.Candidate.Short(), e.Time
		case *audit.Finalize:
			it.Detail, at = kind+" "+e.Candidate.Short(), e.Time
		case *audit.Sealed:
			it.Detail, at = fmt.Sprintf("pass vector sealed: %d/%d", e.Passed, e.Questions), e.Time
		default:
			continue
		}
		if it.Kind != audit.KindCall && it.Kind != audit.KindGateway {
			if at.IsZero() {
				at = r.Finished
			}
			it.Start, it.End = at.Sub(r.Started), at.Sub(r.Started)
		}
		r.Items = append(r.Items, it)
	}
}

var reportPage = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sealrun run {{.ID}}</title>
<style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 960px; padding: 0 1em; color: #1b1b1b; }
table { border-collapse: collapse; margin: 1em 0; } td, th { text-align: left; padding: .25em .8em .25em 0; vertical-align: top; }
.muted { color: #666; } svg text { font: 11px system-ui, sans-serif; } .bad { color: #b03a2e; }
</style></head><body>
<h1>Run {{.ID}}</h1>
<table>
<tr><th>track</th><td>{{.Track}}</td></tr>
<tr><th>agent</th><td>{{.Agent}}, seed {{.Seed}}</td></tr>
<tr><th>result</th><td><b>{{.Status}}</b>{{if .Reason}} — {{.Reason}}{{end}}: {{if .Metric}}{{.Metric}}{{else}}{{.Passed}}/{{.Questions}} passed{{end}}</td></tr>
<tr><th>time</th><td>started {{.Started.Format "2006-01-02 15:04:05 MST"}}, deadline {{.Deadline.Format "15:04:05"}}, finished {{.Finished.Format "15:04:05"}}</td></tr>
<tr><th>activity</th><td>{{.Calls}} compute calls, {{.Requests}} model requests ({{.TokensText}}), {{.Submissions}} submissions</td></tr>
</table>
<h2>Timeline</h2>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}">
<rect width="100%" height="100%" fill="#fff"/>
<text x="8" y="34">calls</text><text x="8" y="64">model</text><text x="8" y="94">submissions</text><text x="8" y="124">promote / end</text>
<text x="8" y="154">validation %</text>
{{range .Ticks}}<line x1="{{.X}}" y1="14" x2="{{.X}}" y2="255" stroke="#eee"/><text x="{{.X}}" y="272" text-anchor="middle">{{.Label}}</text>{{end}}
<line x1="110" y1="150" x2="870" y2="150" stroke="#ddd"/><line x1="110" y1="250" x2="870" y2="250" stroke="#ddd"/>
<text x="100" y="153" text-anchor="end">100</text><text x="100" y="253" text-anchor="end">0</text>
{{range .Items}}{{if .IsCall}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="14" transform="translate(0,-10)" fill="{{if .Failed}}#d98880{{else}}#5dade2{{end}}"><title>{{.Detail}}</title></rect>{{end}}{{if .IsGateway}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="10" transform="translate(0,-8)" fill="{{if .Failed}}#d98880{{else}}#a569bd{{end}}"><title>{{.Detail}}</title></rect>{{end}}{{if .IsSubmission}}<circle cx="{{.X}}" cy="{{.Y}}" r="5" fill="{{if .Failed}}#d98880{{else}}#27ae60{{end}}"><title>{{.Detail}}</title></circle>{{end}}{{if .HasScore}}<circle cx="{{.X}}" cy="{{.ScoreY}}" r="4" fill="#e67e22"><title>{{.Detail}}</title></circle>{{end}}
{{end}}{{if .ValPath}}<path d="{{.ValPath}}" fill="none" stroke="#e67e22" stroke-width="1.5"/>{{end}}
</svg>
<p class="muted">Hover a mark for its detail. Validation scores are feedback only; the promoted candidate is what the hidden exam graded.</p>
<h2>Events</h2>
<table>{{range .Items}}<tr><td class="muted">+{{.Offset}}</td><td{{if .Failed}} class="bad"{{end}}>{{.Detail}}</td></tr>{{end}}</table>
<p class="muted">Files: result.att.json (verify with sealrun verify), report.json, audit.jsonl, history.jsonl, transcript.log, calls/.</p>
</body></html>
`))
