package farm

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNewestStatusFiles: from a listing, each job's newest incarnation's
// status file; other names are passed over.
func TestNewestStatusFiles(t *testing.T) {
	names := []string{"status.7.r2", "status.7", "status.7.r1", "status.8", "status.9.tmp123", "README", "status.10.r1"}
	want := map[string]string{"7": "status.7.r2", "8": "status.8", "10": "status.10.r1"}
	if diff := cmp.Diff(want, NewestStatusFiles(names)); diff != "" {
		t.Errorf("NewestStatusFiles (-want +got):\n%s", diff)
	}
}
