package images

import (
	"testing"

	"github.com/sealrun/sealrun/internal/testenv"
)

// requireRoot gates a test that needs root (chown into a user-namespace range); under CI=true a
// missing root fails instead of skipping.
func requireRoot(t *testing.T) { t.Helper(); testenv.RequireRoot(t) }
