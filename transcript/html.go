package transcript

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"strings"
	"sync"
	"time"
)

// pageLayout names the page's frame as Render writes it; change it with that frame.
const pageLayout = "sealrun-transcript-page/1"

//go:embed page.css
var pageCSS string

//go:embed page.js
var pageScript string

//go:embed player.js
var playerJS string

// pageJS is the page's one script: the terminal player (human runs), then the page, which tells
// the player the transcript.
var pageJS = playerJS + "\n" + pageScript

// PageVersion names the page Render makes, its frame and the digest of its style and script: a
// reader re-renders a transcript.html to check it only when it was made by the same page (another
// sealrun's page is reported, not judged).
var PageVersion = func() string {
	sum := sha256.Sum256([]byte(pageLayout + "\x00" + pageCSS + "\x00" + pageJS))
	return pageLayout + "+" + hex.EncodeToString(sum[:6])
}()

// CSPHashes are the Content-Security-Policy sources of the page's one style and one script.
func CSPHashes() (style, script string) { h := cspHashes(); return h[0], h[1] }

// cspHashes hashes the page's style and script once: every page (a publication renders one a
// run, and verify renders each again) carries the same two.
var cspHashes = sync.OnceValue(func() [2]string { return [2]string{cspHash(pageCSS), cspHash(pageJS)} })

func cspHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// PageCSP is the page's Content-Security-Policy: nothing loads from anywhere, only its own
// style and script run, and a live page may ask its own server (connect-src 'self').
func PageCSP() string {
	style, script := CSPHashes()
	return "default-src 'none'; script-src " + script + "; style-src " + style + "; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'"
}

func hasTerminal(t *Transcript) bool {
	if strings.HasPrefix(t.Run.Agent, "human/") {
		return true // a live page's recording is still to come
	}
	for _, e := range t.Events {
		if e.Terminal != nil {
			return true
		}
	}
	return false
}

// PageOptions change the page.
type PageOptions struct {
	// Live is the URL the page asks for the entries after the last it has (sealrun view); ""
	// makes a static page.
	Live string
	// Back is a link to the list of runs ("" for none).
	Back string
}

// Render writes the transcript page: one self-contained HTML file (no network, no CDN; it
// works from a file:// URL), its data the transcript's JSON inside the page, its text put on
// screen only as text.
func Render(w io.Writer, t *Transcript, o PageOptions) error {
	return renderMarshaled(w, t, o, nil)
}

// renderMarshaled is Render with the transcript's JSON already made (Marshal's bytes, nil: made
// here): Check, which has just marshalled it, does not encode it a second time.
func renderMarshaled(w io.Writer, t *Transcript, o PageOptions, marshaled []byte) error {
	data := bytes.NewBuffer(marshaled)
	if marshaled == nil {
		// Marshal's encoding: HTML escaped, so that no "<", ">" or "&" inside the script
		// element can close it early.
		enc := json.NewEncoder(data)
		enc.SetEscapeHTML(true)
		if err := enc.Encode(t); err != nil {
			return fmt.Errorf("encode transcript: %w", err)
		}
	}
	e := html.EscapeString
	var b bytes.Buffer
	b.Grow(len(pageCSS) + len(pageJS) + data.Len() + 4<<10) // the page's size: one allocation
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<meta http-equiv=\"Content-Security-Policy\" content=\"%s\">\n", PageCSP()) // our constant: no double quote
	fmt.Fprintf(&b, "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"%s\">\n", PageVersion)
	fmt.Fprintf(&b, "<title>%s — sealrun transcript</title>\n<style>", e(t.Run.ID))
	b.WriteString(pageCSS)
	b.WriteString("</style>\n</head>\n")
	if o.Live != "" {
		fmt.Fprintf(&b, "<body data-live=\"%s\">\n", e(o.Live))
	} else {
		fmt.Fprintf(&b, "<body>\n")
	}
	fmt.Fprintf(&b, "<header id=\"head\"><h1>Run %s</h1><div class=\"facts\">%s — %s</div></header>\n", e(t.Run.ID), e(t.Run.State), e(t.Run.Reason))
	if len(t.Amendments) > 0 {
		// What was found after the run ended (a header: the page's style frames it; no inline
		// style passes its CSP): its operator's words, as text; a link only http(s)
		// (the amendment's check), never followed with the page's referrer.
		fmt.Fprintf(&b, "<header id=\"amended\"><b>Amended after it ended</b> (signed by its host, in its ledger: amendments/):<ul>")
		for _, a := range t.Amendments {
			what := map[string]string{"invalidate": "invalidated: out of every mean", "legacy": "legacy: graded under a superseded protocol", "note": "note"}[a.Action]
			fmt.Fprintf(&b, "<li>%s, %s: %s", e(a.Time.UTC().Format(time.DateOnly)), e(what), e(a.Reason))
			if strings.HasPrefix(a.Link, "https://") || strings.HasPrefix(a.Link, "http://") {
				fmt.Fprintf(&b, " (<a href=\"%s\" rel=\"noopener noreferrer nofollow\">report</a>)", e(a.Link))
			}
			fmt.Fprintf(&b, "</li>")
		}
		fmt.Fprintf(&b, "</ul></header>\n")
	}
	fmt.Fprintf(&b, "<noscript>This page draws the transcript with JavaScript. transcript.json beside it holds the same, as JSON (docs/TRANSCRIPT.md).</noscript>\n")
	fmt.Fprintf(&b, "<div id=\"bar\">")
	if o.Back != "" {
		fmt.Fprintf(&b, "<a href=\"%s\">all runs</a>", e(o.Back))
	}
	fmt.Fprintf(&b, "<input type=\"search\" id=\"q\" placeholder=\"search the run's text\" aria-label=\"search\">"+
		"<button id=\"prev\" title=\"previous match (shift+enter)\">&#8593;</button><button id=\"next\" title=\"next match (enter)\">&#8595;</button><span id=\"count\" class=\"count\"></span>"+
		"<button id=\"fail\" title=\"refused or retried requests, non-zero exits, calls killed at a limit, refused submissions, validation drops\">next failure</button>"+
		"<label><input type=\"checkbox\" name=\"model\" checked> model</label><label><input type=\"checkbox\" name=\"call\" checked> calls</label>"+
		"<label><input type=\"checkbox\" name=\"sub\" checked> submissions</label><label><input type=\"checkbox\" name=\"clock\" checked> clock</label>"+
		"<label><input type=\"checkbox\" name=\"failed\"> failures only</label><span id=\"live\" class=\"live\"></span></div>\n")
	fmt.Fprintf(&b, "<canvas id=\"axis\" title=\"the run on its time axis: click to jump\"></canvas>\n")
	if hasTerminal(t) {
		// A human run's recording, played by the page's own terminal (player.js).
		fmt.Fprintf(&b, "<section id=\"term\" hidden><div class=\"tbar\"><b>terminal</b><button id=\"tplay\">play</button>"+
			"<select id=\"tspeed\" aria-label=\"speed\"><option value=\"1\">1×</option><option value=\"4\" selected>4×</option><option value=\"16\">16×</option><option value=\"64\">64×</option></select>"+
			"<input type=\"range\" id=\"tpos\" min=\"0\" max=\"1\" value=\"0\" aria-label=\"position in the recording\"><span id=\"ttime\" class=\"at\"></span><span id=\"tnote\" class=\"sub\"></span></div>"+
			"<div id=\"tscreen\" class=\"tscreen\" title=\"the person's terminal: click a row of the run to see it then\"></div></section>\n")
	}
	fmt.Fprintf(&b, "<main id=\"list\"></main>\n")
	fmt.Fprintf(&b, "<script type=\"application/json\" id=\"transcript\">")
	b.Write(bytes.TrimSuffix(data.Bytes(), []byte("\n")))
	b.WriteString("</script>\n<script>")
	b.WriteString(pageJS)
	b.WriteString("</script>\n</body></html>\n")
	_, err := w.Write(b.Bytes())
	return err
}
