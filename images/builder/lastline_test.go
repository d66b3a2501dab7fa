package builder

import (
	"testing"
)

func TestLastLine(t *testing.T) {
	l := &lastLine{prefix: "I: "}
	l.Write([]byte("I: Retrieving a\nW: noise\nI: Unpa"))
	l.Write([]byte("cking b\npartial"))
	if got := l.String(); got != "I: Unpacking b" {
		t.Errorf("last line %q", got)
	}
}
