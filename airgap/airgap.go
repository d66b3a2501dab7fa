// Package airgap is the air-gap evidence of a sealrun container's network namespace and the rule
// it must meet for its role: what the createRuntime hook (sandbox/netnshook) records from the
// host with netlink, what an attestation carries, and what a verifier checks on any machine. It
// is data and one rule: it imports nothing of sealrun's and nothing of Linux's.
package airgap

import (
	"fmt"
	"net"
	"sort"
	"strings"
	"time"
)

// Role names, as the sandbox's roles.
const (
	RoleController = "controller"
	RoleRunner     = "runner"
	RoleGrader     = "grader"
)

// The controller's /30 to its run's gateway. Every run has its own gateway netns and every
// controller its own netns, so the same addresses serve every run without ever meeting.
var (
	GatewayIP    = net.IPv4(10, 88, 0, 1)
	ControllerIP = net.IPv4(10, 88, 0, 2)
	LinkMask     = net.CIDRMask(30, 32)
)

// Link names inside the namespaces (not in the host's).
const (
	GatewayLink    = "gw0"
	ControllerLink = "eth0"
)

// Evidence is one network namespace as netlink shows it from the host.
type Evidence struct {
	Links     []string `json:"links"`     // "name (type, up|down)"
	Addresses []string `json:"addresses"` // "ip/prefix dev"
	Routes    []string `json:"routes"`    // "dst [via gw] dev", every table
	Names     []string `json:"names"`     // link names only
}

// Record is what the hook writes for the sandbox, atomically, once the namespace is configured
// and checked: the container's init pid as the runtime reported it (so the sandbox never waits
// on a pid file the runtime writes later) and the evidence.
type Record struct {
	Pid      int      `json:"pid"`
	Evidence Evidence `json:"evidence"`
	// Began and Ended bracket the hook's work (wall clock, the host's): the sandbox's start-up
	// breakdown (make bench) reads them.
	Began time.Time `json:"began"`
	Ended time.Time `json:"ended"`
}

// LinkNames returns the names of evidence links ("eth0 (veth, up)" -> "eth0"), sorted.
func LinkNames(links []string) []string {
	out := make([]string, 0, len(links))
	for _, l := range links {
		n, _, _ := strings.Cut(l, " ")
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Check says what, if anything, a container's namespace has that its role must not:
// runner and grader exactly lo; the controller lo and its veth with the /30; no default route,
// no IPv6 address, no route but the /30 and loopback's own.
func Check(role string, ev Evidence) error {
	want := []string{"lo"}
	if role == RoleController {
		want = []string{ControllerLink, "lo"}
	}
	if strings.Join(ev.Names, ",") != strings.Join(want, ",") {
		return fmt.Errorf("%s netns has links %v; expected %v", role, ev.Names, want)
	}
	for _, a := range ev.Addresses {
		if strings.Contains(a, ":") {
			return fmt.Errorf("%s netns has an IPv6 address %s", role, a)
		}
		if !strings.HasPrefix(a, "127.0.0.1/8 ") && !(role == RoleController && a == ControllerIP.String()+"/30 "+ControllerLink) {
			return fmt.Errorf("%s netns has an unexpected address %s", role, a)
		}
	}
	for _, r := range ev.Routes {
		if strings.HasPrefix(r, "default") || strings.HasPrefix(r, "0.0.0.0/0") {
			return fmt.Errorf("%s netns has a default route: %s", role, r)
		}
		local := strings.HasSuffix(r, " table 255")
		link := role == RoleController && strings.HasPrefix(r, "10.88.0.0/30 dev "+ControllerLink)
		if !local && !link {
			return fmt.Errorf("%s netns has an unexpected route: %s", role, r)
		}
	}
	return nil
}
