package daemon

import (
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/sealrun/sealrun/hostconfig"
	"github.com/sealrun/sealrun/ledger/witness"
	"github.com/sealrun/sealrun/ledger/witness/witnesstest"
	"github.com/sealrun/sealrun/sandbox/netnshook"
)

// witnessNet is a network namespace of the test's own joined to the host's by a veth pair (host
// 10.213.N.1/30, the namespace 10.213.N.2/30): a machine elsewhere, as a witness is. An
// unreachable one has its end of the pair down: packets to it vanish, as to a host that is off.
type witnessNet struct {
	ns netns.NsHandle
	ip string
}

func newWitnessNet(t testing.TB, n int, reachable bool) *witnessNet {
	t.Helper()
	hostName := fmt.Sprintf("sealrunw%d-%d", os.Getpid()%10000, n)
	peerName := fmt.Sprintf("sealrunx%d-%d", os.Getpid()%10000, n)
	var ns netns.NsHandle
	if err := netnshook.OnThread(func() error {
		var err error
		ns, err = netns.New() // this thread only; OnThread switches back
		return err
	}); err != nil {
		t.Fatalf("network namespace for witness %d: %v", n, err)
	}
	t.Cleanup(func() { ns.Close() }) // the last handle: the namespace goes with it
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: hostName}, PeerName: peerName}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("veth %s: %v", hostName, err)
	}
	t.Cleanup(func() { netlink.LinkDel(veth) }) // its peer goes with it
	peer, err := netlink.LinkByName(peerName)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(peer, int(ns)); err != nil {
		t.Fatal(err)
	}
	host, err := netlink.LinkByName(hostName)
	if err != nil {
		t.Fatal(err)
	}
	addr := func(last int) *netlink.Addr {
		return &netlink.Addr{IPNet: &net.IPNet{IP: net.IPv4(10, 213, byte(n), byte(last)), Mask: net.CIDRMask(30, 32)}}
	}
	if err := netlink.AddrAdd(host, addr(1)); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(host); err != nil {
		t.Fatal(err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	inside, err := h.LinkByName(peerName)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(inside, addr(2)); err != nil {
		t.Fatal(err)
	}
	lo, _ := h.LinkByName("lo")
	h.LinkSetUp(lo)
	if reachable {
		if err := h.LinkSetUp(inside); err != nil {
			t.Fatal(err)
		}
	}
	return &witnessNet{ns: ns, ip: fmt.Sprintf("10.213.%d.2", n)}
}

// listen opens a TCP listener inside the namespace.
func (w *witnessNet) listen(t testing.TB) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := netnshook.InNetns(w.ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", w.ip+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return ln
}

// netWitnesses are three witnesses of the testbed's ledger, each in its own network namespace:
// "cosigns" (sealrun's witness, cosigning what it should), "garbage" (answers 200 with text that
// is no cosignature) and "down" (its namespace unreachable). It returns them as sealrun.toml's
// [[witnesses]], and the cosigning one.
func netWitnesses(t testing.TB, tb *testbed, first int) ([]hostconfig.WitnessConfig, *witnesstest.Witness) {
	t.Helper()
	hostPub, _ := tb.verifier.PublicKey()
	good := witnesstest.ServeOn(t, newWitnessNet(t, first, true).listen(t), "witness.test/daemon", ledgerOrigin(tb.cfg), hostPub)
	gn := newWitnessNet(t, first+1, true)
	garbageURL := witnesstest.Garbage(t, gn.listen(t))
	_, garbageKey, _ := witness.GenerateKey("witness.test/garbage")
	dn := newWitnessNet(t, first+2, false)
	_, downKey, _ := witness.GenerateKey("witness.test/down")
	return []hostconfig.WitnessConfig{
		{Name: "cosigns", URL: good.URL, Key: good.Key},
		{Name: "garbage", URL: garbageURL, Key: garbageKey},
		{Name: "down", URL: "http://" + dn.ip + ":8080", Key: downKey},
	}, good
}
