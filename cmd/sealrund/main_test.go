package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func TestFlagsAndConfig(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "Usage: sealrund"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--bogus"}, 2, "flag provided but not defined"},
		{[]string{"--config", filepath.Join(t.TempDir(), "none.toml")}, 1, "the configuration is not valid; nothing was started"},
		{[]string{"--config", "../../deploy/sealrun.toml", "--check"}, 1, "keys.signing"},
	} {
		var errb bytes.Buffer
		if code := run(c.args, &errb); code != c.code || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d %q; want %d %q", c.args, code, errb.String(), c.code, c.want)
		}
	}
}
