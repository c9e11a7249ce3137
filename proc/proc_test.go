package proc

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/farm-hpc/farm/internal/testreq"
)

func TestMain(m *testing.M) {
	if os.Getenv("PROC_TEST_ROLE") == "hostid" {
		fmt.Print(HostID())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var hostIDForm = regexp.MustCompile(`^[A-Za-z0-9._%-]+/[A-Za-z0-9._%-]+/pid:\[[0-9]+\]$`)

func TestHostIDForm(t *testing.T) {
	id := HostID()
	if !hostIDForm.MatchString(id) {
		t.Fatalf("HostID() = %q, want HOSTNAME/BOOT_ID/pid:[INODE]", id)
	}
	name, _ := os.Hostname()
	if HostName(id) != name {
		t.Errorf("HostName(%q) = %q, want %q", id, HostName(id), name)
	}
	if HostID() != id {
		t.Error("HostID changed between calls")
	}
	// Another process on this host has the same.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PROC_TEST_ROLE=hostid")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != id {
		t.Errorf("another process here: %q, want %q", out, id)
	}
	if got := escape("a b/c%é"); got != "a%20b%2Fc%25%C3%A9" || HostName(got+"/x/y") != "a b/c%é" {
		t.Errorf("escape: %q", got)
	}
}

// TestHostIDNamespaces: a process in another PID namespace is another host,
// with the same host name (a container) or another one (a simulated node).
func TestHostIDNamespaces(t *testing.T) {
	// proc cannot import internal/testhost (which imports nothing of
	// farm's, but lives above it): the same gate, written out.
	skip := func(why string) { testreq.Skip(t, "FARM_REQUIRE_NAMESPACES", why) }
	if os.Geteuid() != 0 {
		skip("needs root (unshare)")
	}
	if err := exec.Command("unshare", "--uts", "--pid", "--fork", "--mount-proc", "true").Run(); err != nil {
		skip(fmt.Sprintf("needs unshare: %v", err))
	}
	ours := HostID()
	for _, tc := range []struct {
		name, script string
		host         string
	}{
		{"same host name, own PID namespace", `exec "$0" -test.run='^$'`, HostName(ours)},
		{"own host name and PID namespace", `hostname nodeA && exec "$0" -test.run='^$'`, "nodeA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command("unshare", "--uts", "--pid", "--fork", "--mount-proc", "sh", "-c", tc.script, os.Args[0])
			cmd.Env = append(os.Environ(), "PROC_TEST_ROLE=hostid")
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			id := string(out)
			if !hostIDForm.MatchString(id) || id == ours || HostName(id) != tc.host {
				t.Errorf("HostID there = %q, here %q; want another ID with host name %q", id, ours, tc.host)
			}
			// Same boot: only the namespace (and the name) differ.
			if strings.Split(id, "/")[1] != strings.Split(ours, "/")[1] {
				t.Errorf("boot IDs differ: %q, %q", id, ours)
			}
		})
	}
}

func TestUmaskIsTheProcesss(t *testing.T) {
	m := syscall.Umask(0o22)
	syscall.Umask(m)
	if got := Umask(); got != os.FileMode(m) {
		t.Errorf("Umask() = %o, want %o", got, m)
	}
}
