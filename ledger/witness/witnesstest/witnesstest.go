// Package witnesstest serves sealrun's witness on loopback for other packages' tests: a host's
// ledger shown to a real witness, its cosignatures checked as a reader checks them.
package witnesstest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sealrun/sealrun/ledger/witness"
)

// Witness is a witness serving until the test ends.
type Witness struct {
	Name string // its key name
	Key  string // its public key (vkey), what --witness and [[witnesses]] take
	URL  string
	// Target is it as a host's follower sends to it.
	Target witness.Target
}

// Serve starts a witness named name following origin's ledger, whose heads are signed with pub
// (the host's public key), until the test ends.
func Serve(t testing.TB, name, origin string, pub any) *Witness {
	t.Helper()
	return ServeOn(t, nil, name, origin, pub)
}

// ServeOn is Serve on the listener ln (one opened in a network namespace of the test's, say);
// nil is a loopback one.
func ServeOn(t testing.TB, ln net.Listener, name, origin string, pub any) *Witness {
	t.Helper()
	skey, vkey, err := witness.GenerateKey(name)
	if err != nil {
		t.Fatal(err)
	}
	c, err := witness.NewCosigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := witness.NewVerifier(vkey)
	if err != nil {
		t.Fatal(err)
	}
	st, err := witness.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := witness.ServerFor(c, origin, pub, st)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(srv)
	if ln != nil {
		ts.Listener.Close()
		ts.Listener = ln
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return &Witness{Name: name, Key: vkey, URL: ts.URL, Target: witness.Target{Name: name, URL: ts.URL, Verifier: v}}
}

// Garbage serves, on ln, a "witness" that answers every request 200 with text that is no
// cosignature, until the test ends; its URL.
func Garbage(t testing.TB, ln net.Listener) string {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("— not-a-witness AAAA\nhello\n"))
	}))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	return ts.URL
}
