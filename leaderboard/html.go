package leaderboard

import (
	"fmt"
	"html/template"
	"io"
	"path"
	"path/filepath"
)

// chart is the SVG drawing of one table: a dot at each row's mean with its ± SE bar, on a 0–100%
// axis, one line per row in the table's order.
type chart struct {
	Width, Height int
	Ticks         []tick
	Bars          []bar
}

type tick struct {
	X     float64
	Label string
}

type bar struct {
	Y, X, X1, X2 float64
	HasSE        bool
	Label        string
	Value        string
	Provisional  bool
}

const (
	chartLeft  = 330.0
	chartWidth = 480.0
	rowHeight  = 28.0
)

func xOf(pct float64) float64 { return chartLeft + chartWidth*min(max(pct, 0), 100)/100 }

func (t *Table) chart() chart {
	c := chart{Width: int(chartLeft + chartWidth + 40)}
	for p := 0; p <= 100; p += 20 {
		c.Ticks = append(c.Ticks, tick{X: xOf(float64(p)), Label: fmt.Sprintf("%d%%", p)})
	}
	y := 30.0
	for i := range t.Rows {
		r := &t.Rows[i]
		if r.MeanPct == nil {
			continue
		}
		b := bar{Y: y, X: xOf(*r.MeanPct), X1: xOf(*r.MeanPct), X2: xOf(*r.MeanPct), Label: r.Agent.Name(), Value: r.MeanText(), Provisional: r.Provisional}
		if r.SEPct != nil {
			b.HasSE, b.X1, b.X2 = true, xOf(*r.MeanPct-*r.SEPct), xOf(*r.MeanPct+*r.SEPct)
			b.Value += " ± " + r.SEText()
		}
		c.Bars = append(c.Bars, b)
		y += rowHeight
	}
	c.Height = int(y + 10)
	return c
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"chart":   func(t *Table) chart { return t.chart() },
	"cells":   func(r *Row) []string { return r.cells() },
	"amended": func(r *Row) []Run { return r.AmendedRuns() },
	"sortkey": func(r *Row) string {
		if r.MeanPct == nil {
			return "-1"
		}
		return fmt.Sprintf("%.6f", *r.MeanPct)
	},
	"short":   shortID,
	"add":     func(a, b float64) float64 { return a + b },
	"sub":     func(a, b float64) float64 { return a - b },
	"columns": func() []string { return columns },
	// runlink is a run's report.html beside its attestation (runs/<id>/ of a publication).
	"runlink": func(p string) string { return path.Dir(filepath.ToSlash(p)) + "/report.html" },
	// transcriptlink is the run's transcript.html beside it: what the agent did.
	"transcriptlink": func(p string) string { return path.Dir(filepath.ToSlash(p)) + "/transcript.html" },
	// trajectorylink is the run's trajectory.json (ATIF) beside it, in a publication.
	"trajectorylink": func(p string) string { return path.Dir(filepath.ToSlash(p)) + "/trajectory.json" },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>sealrun leaderboard</title>
<style>
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1320px; padding: 0 1em; color: #1b1b1b; background: #fff; overflow-wrap: break-word; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
.scroll { overflow-x: auto; margin: 1em 0; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid #ddd; padding: .35em .5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; cursor: pointer; font-size: .92em; }
td.num { font-variant-numeric: tabular-nums; white-space: nowrap; }
td.agent { min-width: 12em; }
code { overflow-wrap: anywhere; }
.note { background: #fff4d6; padding: .4em .8em; border-left: 4px solid #e0a800; }
.muted { color: #666; font-size: .92em; }
svg text { font: 12px system-ui, sans-serif; fill: #1b1b1b; }
@media (max-width: 640px) { body { font-size: 14px; margin: 1em auto; padding: 0 .6em; } th, td { padding: .3em .35em; } td.agent { min-width: 9em; } }
</style>
</head>
<body>
<h1>sealrun leaderboard</h1>
<p class="muted">Every number below comes from a signed attestation that verified with a trusted key. Scores are percent of hidden-exam questions answered exactly, mean ± standard error over valid seeded runs.</p>
{{range $ti, $t := .Tables}}
<section>
<h2>{{$t.TrackTitle}}</h2>
<p class="muted">Track id <code>{{$t.Track.ID}}</code> · {{$t.Questions}} questions · official rows need {{$t.SeedsRequired}} valid seeds</p>
{{range $t.Warnings}}<p class="note">{{.}}</p>{{end}}
{{with $c := chart $t}}{{if $c.Bars}}
<div class="scroll"><svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}" viewBox="0 0 {{.Width}} {{.Height}}" role="img" aria-label="mean score with standard error bars, per agent">
  <rect x="0" y="0" width="{{.Width}}" height="{{.Height}}" fill="#ffffff"/>
  {{range .Ticks}}<line x1="{{.X}}" y1="12" x2="{{.X}}" y2="{{$c.Height}}" stroke="#e3e3e3"/><text x="{{.X}}" y="10" text-anchor="middle">{{.Label}}</text>
  {{end}}{{range .Bars}}<g class="bar"><text x="320" y="{{.Y}}" text-anchor="end" dy="4">{{.Label}}</text>
    {{if .HasSE}}<line class="errorbar" x1="{{.X1}}" y1="{{.Y}}" x2="{{.X2}}" y2="{{.Y}}" stroke="#c0392b" stroke-width="3"/>
    <line class="errorbar" x1="{{.X1}}" y1="{{sub .Y 7.0}}" x2="{{.X1}}" y2="{{add .Y 7.0}}" stroke="#c0392b" stroke-width="3"/><line class="errorbar" x1="{{.X2}}" y1="{{sub .Y 7.0}}" x2="{{.X2}}" y2="{{add .Y 7.0}}" stroke="#c0392b" stroke-width="3"/>{{end}}
    <circle cx="{{.X}}" cy="{{.Y}}" r="6" fill="{{if .Provisional}}#ffffff{{else}}#1f5fbf{{end}}" stroke="#1f5fbf" stroke-width="3"/>
    <text x="{{add .X2 10.0}}" y="{{.Y}}" dy="4">{{.Value}}</text></g>
  {{end}}
</svg></div>
<p class="muted">Filled dot: official row; hollow dot: provisional. Bars: ± one standard error.</p>
{{end}}{{end}}
<div class="scroll"><table class="board" id="board-{{$ti}}">
<thead><tr>{{range $i, $c := columns}}<th data-col="{{$i}}">{{$c}}</th>{{end}}</tr></thead>
<tbody>
{{range $t.Rows}}<tr data-sort="{{sortkey .}}">{{range $i, $c := cells .}}<td{{if or (eq $i 0) (eq $i 2) (eq $i 3) (eq $i 5) (eq $i 7) (eq $i 8)}} class="num"{{else if eq $i 1}} class="agent"{{end}}>{{$c}}</td>{{end}}</tr>
{{end}}</tbody>
</table></div>
<details class="runs"><summary>Each row's runs (their report.html: the calls, submissions and validation scores over the hour; their transcript: every model exchange and call the agent made)</summary>
<ul>{{range $t.Rows}}<li>{{.Agent.Name}}: {{range $i, $r := .Runs}}{{if $i}}, {{end}}<a href="{{runlink $r.Path}}">seed {{$r.Seed}}</a> (<a href="{{transcriptlink $r.Path}}">transcript</a>{{if $.Exports}}, <a href="{{trajectorylink $r.Path}}">ATIF</a>{{end}}, {{$r.ID}}, {{$r.Status}}{{if $r.People}}; {{$r.People}}{{end}}{{range $r.Amendments}}; amended: {{.Text}}{{end}}){{end}}{{range .Invalid}}; <a href="{{runlink .Path}}">seed {{.Seed}}</a> (<a href="{{transcriptlink .Path}}">transcript</a>{{if $.Exports}}, <a href="{{trajectorylink .Path}}">ATIF</a>{{end}}, {{.ID}}, invalid: {{.Reason}}{{range .Amendments}}{{if ne .Action "invalidate"}}; amended: {{.Text}}{{end}}{{end}}{{if .Amendments}}{{range .Amendments}}{{if .Link}}{{if eq .Action "invalidate"}} (<a href="{{.Link}}" rel="nofollow noopener">report</a>){{end}}{{end}}{{end}}{{end}}){{end}}</li>
{{end}}</ul></details>
{{range $t.Rows}}{{$row := .}}{{range amended .}}{{$run := .}}{{range .Amendments}}<p class="muted">Amended: {{$row.Agent.Name}}, {{$run.ID}} (seed {{$run.Seed}}): {{.Text}}</p>
{{end}}{{end}}{{end}}</section>
{{end}}
{{if .Rejected}}<h2>Rejected (not counted)</h2>
<ul>{{range .Rejected}}<li><code>{{.Path}}</code>: {{.Reason}}</li>{{end}}</ul>{{end}}
<h2>Rules</h2>
<ul>{{range .Rules}}<li>{{.}}</li>{{end}}</ul>
<p class="muted">Trusted keys: {{range $i, $k := .Keys}}{{if $i}}, {{end}}{{$k.Name}} ({{short $k.KeyID}}){{end}}</p>
<script>
// Optional: click a column heading to sort; the page reads the same without JavaScript.
document.querySelectorAll("table.board th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0], col = +th.dataset.col;
    var rows = Array.prototype.slice.call(body.rows), dir = th.dataset.dir === "asc" ? -1 : 1;
    th.dataset.dir = dir === 1 ? "asc" : "desc";
    rows.sort(function (a, b) {
      var x = a.cells[col].textContent, y = b.cells[col].textContent;
      var nx = parseFloat(x.replace(/^=/, "")), ny = parseFloat(y.replace(/^=/, ""));
      if (col === 2) { nx = +a.dataset.sort; ny = +b.dataset.sort; }
      if (!isNaN(nx) && !isNaN(ny)) return dir * (nx - ny);
      return dir * x.localeCompare(y);
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
</script>
</body>
</html>
`))

func (b *Board) html(w io.Writer) error { return page.Execute(w, b) }
