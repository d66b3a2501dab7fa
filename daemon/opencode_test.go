package daemon

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sealrun/sealrun/attest"
	"github.com/sealrun/sealrun/audit"
	"github.com/sealrun/sealrun/controller"
	"github.com/sealrun/sealrun/internal/testenv"
	"github.com/sealrun/sealrun/outcome"
	"github.com/sealrun/sealrun/policy"
	"github.com/sealrun/sealrun/scaffolds"
	"github.com/sealrun/sealrun/transcript"
)

// opencodeTrack is the testbed's track with the opencode controller image and scaffold pin, and
// budgets for a compute call longer than opencode's own shell-tool default (2 minutes).
func opencodeTrack(t testing.TB, tb *testbed) (*policy.Track, string) {
	t.Helper()
	oc, _ := scaffolds.Lookup("opencode")
	return shippedTrack(t, tb, oc, map[string]string{`wall = "3m"`: `wall = "6m"`, `call_limit = "1m"`: `call_limit = "4m"`})
}

// shippedTrack is the testbed's track with a shipped scaffold's controller image and pin, its
// budgets changed as edits says.
func shippedTrack(t testing.TB, tb *testbed, sc *scaffolds.Scaffold, edits map[string]string) (*policy.Track, string) {
	t.Helper()
	ref := testenv.LocalImages(t).Refs[sc.ImageKey()]
	if ref == "" {
		t.Fatalf("%s/images.lock has no %s image; make test builds it (sealrun images build-local)", testenv.LocalImages(t).State, sc.ImageKey())
	}
	text := scaffoldTrack(tb.trackTOML, ref, sc.Name, sc.Version, sc.ConfigSHA256())
	// The memory the scaffold needs (admission refuses less): the testbed's 1 GiB, or more.
	if sc.MemoryBytes > 1<<30 {
		text = strings.Replace(text, `memory = "1GiB"`, `memory = "`+sc.Memory+`"`, 1)
	}
	for old, repl := range edits {
		text = strings.Replace(text, old, repl, 1)
	}
	track, err := policy.Parse(sc.Name+"-test.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return track, text
}

// A whole sealed run with the real opencode in its sealed controller, driven by a scripted model
// behind the real gateway: it reads the brief, checks the clock, makes a compute call longer than
// opencode's shell-tool default, tries another model over raw TCP (refused), looks for Python
// and keys, submits, promotes and finalizes. The run is graded with an attestation that
// verifies; every model request went through the gateway with the run's model and effort; the
// transcript shows each tool call and its output.
func TestOpencodeSealedRun(t *testing.T) {
	tb := newTestbed(t)
	track, _ := opencodeTrack(t, tb)
	candidate := regexp.MustCompile(`candidate ([0-9a-f]{12})`)
	other := `{"model":"gpt-other","messages":[{"role":"user","content":"hi"}]}`
	tb.prov.Agent(
		func(string) string { return "head -5 BRIEF.md" },
		func(string) string { return "runner time_left" },
		// 135 s: past opencode's default of 2 minutes by a margin a loaded host keeps (its tool
		// would cut the call at 120 s, and "long call done" would never be printed).
		func(string) string { return "runner sh -c 'sleep 135; echo long call done'" },
		func(string) string {
			return fmt.Sprintf(`gw=${SEALRUN_GATEWAY#http://}; exec 3<>/dev/tcp/${gw%%:*}/${gw#*:}; printf 'POST /v1/chat/completions HTTP/1.0\r\nHost: %%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%%s' "$gw" '%s' >&3; head -1 <&3`,
				len(other), other)
		},
		func(string) string {
			return `for p in python3 python; do command -v $p || echo "no $p"; done; env | grep -i key; cat /proc/net/route | wc -l`
		},
		// What the controller's network namespace counted: UDP datagrams sent (DNS would be some)
		// and the TCP peers it has (opencode's own loopback server aside).
		func(string) string {
			return `echo "resolv.conf: $(grep -s nameserver /etc/resolv.conf | tr '\n' ' ')"; grep -E '^(Ip|Udp):' /proc/net/snmp; echo "remotes: $(awk 'FNR>1 {print $3}' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u | tr '\n' ' ')"`
		},
		func(string) string { return "mkdir -p b && cp sealrun-bundle.json predict.py b/ && runner submit b" },
		func(last string) string {
			if m := candidate.FindStringSubmatch(last); m != nil {
				return "runner promote " + m[1]
			}
			return "echo no candidate in: " + strings.ReplaceAll(last, "\n", " ")
		},
		func(string) string { return "runner finalize" },
	)
	x := tb.executor()
	x.Journal = tb.journal
	x.Entrypoint = nil // the image's: opencode
	agent, _ := controller.ParseAgent("openai/gpt-x@high")
	id := "run-opencode"
	start := time.Now()
	out, err := x.Execute(context.Background(), RunSpec{ID: id, Track: track, Agent: agent, Seed: 1, Queued: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(tb.state, "runs", id)
	// opencode colours its output even into a file now and then: the checks read it plain.
	tr, _ := os.ReadFile(filepath.Join(dir, "transcript.log")) // absent when the run ended before the agent started
	transcript := regexp.MustCompile("\x1b\\[[0-9;]*m").ReplaceAllString(string(tr), "")
	t.Logf("%s: %s %q in %s\ntranscript:\n%s", id, out.Status, out.Reason, time.Since(start).Round(time.Second), transcript)
	if out.Status != outcome.Graded {
		t.Fatalf("status %s (%s); want graded", out.Status, out.Reason)
	}
	if _, err := attest.Verify(mustRead(t, out.Attestation), tb.verifier, attest.WithTrack(track)); err != nil {
		t.Errorf("attestation: %v", err)
	}
	for _, want := range []string{"$ head -5 BRIEF.md", "$ runner time_left", "long call done", "403", "no python3", "no python", "OPENAI_API_KEY=sealrun-gateway-injects-the-key",
		// Not "$ runner finalize", nor the model's closing "Done: 9 steps run.": finalize ends
		// the run at once, and opencode prints a command with its output, once it has ended; on a
		// loaded host it is stopped before it prints either (two fresh CIs saw it). The audit
		// log's finalize record below is the finalize's evidence.
		"runner submit b", "$ runner promote"} {
		if !strings.Contains(transcript, want) {
			t.Errorf("the transcript lacks %q", want)
		}
	}
	if strings.Contains(transcript, "real-key") {
		t.Errorf("the provider key reached the controller")
	}
	// The route table: the header and the one /30 to the gateway.
	if !regexp.MustCompile(`(?m)^2$`).MatchString(transcript) {
		t.Errorf("the controller's route table is not the gateway's /30 alone")
	}
	checkControllerNet(t, transcript)
	// Every request opencode made reached the provider through the gateway, with the run's model
	// and effort; nothing else was asked for.
	reqs := tb.prov.Requests()
	// One per step at least; the closing turn after finalize may not come (see above).
	if len(reqs) < 9 {
		t.Errorf("the provider saw %d requests; want one per step (9)", len(reqs))
	}
	for i, r := range reqs {
		var body struct {
			Model  string `json:"model"`
			Effort string `json:"reasoning_effort"`
		}
		json.Unmarshal(r.Body, &body)
		if r.Method != "POST" || r.Path != "/v1/chat/completions" || body.Model != "gpt-x" || body.Effort != "high" {
			t.Errorf("provider request %d: %s %s model %q effort %q", i+1, r.Method, r.Path, body.Model, body.Effort)
		}
		if r.Header.Get("Authorization") != "Bearer real-key" {
			t.Errorf("provider request %d: the gateway did not inject the key", i+1)
		}
	}
	log := string(mustRead(t, filepath.Join(dir, "audit.jsonl")))
	if n := strings.Count(log, `"kind":"gateway"`); n != len(reqs)+1 {
		t.Errorf("the audit log has %d gateway entries; want %d forwarded and the refused one", n, len(reqs))
	}
	if n := strings.Count(log, `"kind":"`+audit.KindFinalize+`"`); n != 1 {
		t.Errorf("the audit log has %d finalize records; want the agent's one (its runner finalize)", n)
	}
	checkOpencodeTranscript(t, dir, out.Attestation, len(reqs))
}

// checkOpencodeTranscript reads the run back as its transcript: opencode's streamed requests,
// each shown as what it added (after the first, the tool result of the call before), every
// answer a call of its bash tool, the long call's output among the results, the refused
// request with its reason; every body intact, and the files what the audit log and bodies give.
func checkOpencodeTranscript(t *testing.T, dir, att string, forwarded int) {
	t.Helper()
	rep, err := transcript.Check(dir, readPredicate(t, att))
	if err != nil || len(rep.Problems) > 0 || !rep.Transcript || !rep.Page || rep.Bodies.Intact != 2*forwarded+rep.Calls {
		t.Errorf("the transcript does not check: %+v %v", rep, err)
	}
	tr, err := transcript.Read(filepath.Join(dir, "transcript.json"))
	if err != nil {
		t.Fatal(err)
	}
	var calls, refused int
	var results strings.Builder
	for _, e := range tr.Events {
		x := e.Model
		if x == nil {
			continue
		}
		if x.Refused != "" {
			refused++
			if !strings.Contains(x.Refused, `model "gpt-other" refused`) {
				t.Errorf("refused exchange %d: %q", x.N, x.Refused)
			}
			continue
		}
		if x.API != transcript.APIChat || !x.Streamed || len(x.Output) != 1 {
			t.Errorf("exchange %d: %s, streamed %v, %d answers", x.N, x.API, x.Streamed, len(x.Output))
			continue
		}
		for _, p := range x.Output[0].Parts {
			if p.Type == transcript.PartToolCall && p.Name == "bash" && strings.Contains(p.Text, `"command"`) {
				calls++
			}
		}
		if x.Extends > 0 && (len(x.Added) == 0 || x.Added[len(x.Added)-1].Role != "tool") {
			t.Errorf("exchange %d extends %d but does not end with a tool result: %+v", x.N, x.Extends, x.Added)
		}
		for _, m := range x.Added {
			for _, p := range m.Parts {
				results.WriteString(p.Text)
			}
		}
	}
	if refused != 1 || calls < 9 || !strings.Contains(results.String(), "long call done") {
		t.Errorf("transcript: %d refused, %d bash calls; the long call's output among the results: %v", refused, calls, strings.Contains(results.String(), "long call done"))
	}
}

// A track that pins opencode refuses, before anything is created, an agent whose provider opencode
// cannot drive (the built-in none), and the image's labels against another pin.
func TestOpencodeRefusals(t *testing.T) {
	tb := newTestbed(t)
	track, text := opencodeTrack(t, tb)
	x := tb.executor()
	x.Entrypoint = nil
	none, _ := controller.ParseAgent("none/scripted")
	if _, err := x.Check(RunSpec{Track: track, Agent: none}); err == nil || !strings.Contains(err.Error(), "opencode scaffold needs a model provider of kind openai or anthropic") {
		t.Errorf("provider none: %v", err)
	}
	oc, _ := scaffolds.Lookup("opencode")
	other, err := policy.Parse("t.toml", []byte(strings.Replace(text, oc.Version, "1.18.34", 1)))
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := controller.ParseAgent("openai/gpt-x@high")
	if _, err := x.Check(RunSpec{Track: other, Agent: agent}); err == nil || !strings.Contains(err.Error(), `label dev.sealrun.scaffold.version is "`+oc.Version+`", the track says "1.18.34"`) {
		t.Errorf("version pin: %v", err)
	}
	if _, err := x.Check(RunSpec{Track: track, Agent: agent}); err != nil {
		t.Errorf("the opencode track with its image: %v", err)
	}
}

// checkControllerNet reads what the controller printed of its network namespace's counters: no
// UDP datagram left it (opencode's DNS lookups, with no resolver, end on its own loopback) and
// every TCP peer is the gateway (loopback and listening sockets aside).
func checkControllerNet(t *testing.T, transcript string) {
	t.Helper()
	snmp := map[string]map[string]string{}
	lines := regexp.MustCompile(`(?m)^(Ip|Udp): (.*)$`).FindAllStringSubmatch(transcript, -1)
	for i := 0; i+1 < len(lines); i += 2 {
		names, values := strings.Fields(lines[i][2]), strings.Fields(lines[i+1][2])
		snmp[lines[i][1]] = map[string]string{}
		for j := range min(len(names), len(values)) {
			snmp[lines[i][1]][names[j]] = values[j]
		}
	}
	// A DNS lookup with no resolver configured goes to 127.0.0.1:53, where nothing listens: such
	// a datagram is counted both sent and received for a closed port, in this namespace. Any
	// datagram that left it would be sent and not counted as arriving.
	udp := snmp["Udp"]
	if udp == nil || udp["OutDatagrams"] != udp["NoPorts"] || udp["InDatagrams"] != "0" {
		t.Errorf("UDP datagrams left the controller's namespace (DNS?): %v", udp)
	}
	t.Logf("controller namespace: Ip OutRequests %s, OutNoRoutes %s (sends refused for want of a route); Udp %v", snmp["Ip"]["OutRequests"], snmp["Ip"]["OutNoRoutes"], snmp["Udp"])
	m := regexp.MustCompile(`(?m)^remotes: (.*)$`).FindStringSubmatch(transcript)
	if m == nil {
		t.Fatal("the transcript lacks the controller's TCP peers")
	}
	gw := strings.TrimPrefix(controller.GatewayURL(0), "http://")
	peers := 0
	for _, r := range strings.Fields(m[1]) {
		ip, port, ok := procNetAddr(r)
		if !ok {
			t.Errorf("peer %q: not a /proc/net/tcp address", r)
			continue
		}
		if ip.IsUnspecified() || ip.IsLoopback() {
			continue
		}
		peers++
		if got := net.JoinHostPort(ip.String(), strconv.Itoa(port)); got != gw {
			t.Errorf("the controller has a TCP peer %s; the only one allowed is the gateway %s", got, gw)
		}
	}
	if peers == 0 {
		t.Errorf("no TCP peer at all in %q: opencode's connection to the gateway should be there", m[1])
	}
}

// procNetAddr decodes a /proc/net/tcp address (hex, IPv4 little-endian words): "0100A8C0:1F90".
func procNetAddr(s string) (net.IP, int, bool) {
	h, p, ok := strings.Cut(s, ":")
	b, err := hex.DecodeString(h)
	port, err2 := strconv.ParseUint(p, 16, 16)
	if !ok || err != nil || err2 != nil || (len(b) != 4 && len(b) != 16) {
		return nil, 0, false
	}
	ip := make(net.IP, len(b))
	for w := 0; w < len(b); w += 4 { // each 32-bit word is in host (little-endian) order
		ip[w], ip[w+1], ip[w+2], ip[w+3] = b[w+3], b[w+2], b[w+1], b[w]
	}
	return ip, int(port), true
}
