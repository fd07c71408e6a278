package oci

import "testing"

// TestUnusedID needs no container: it reads /etc/passwd, /etc/group and /proc.
func TestUnusedID(t *testing.T) {
	id, err := UnusedID(1000)
	if err != nil {
		t.Fatal(err)
	}
	if id < 1000 {
		t.Fatalf("id %d", id)
	}
	used := map[uint64]bool{}
	if err := idsFromColonFile("/etc/passwd", used); err != nil {
		t.Fatal(err)
	}
	if used[uint64(id)] {
		t.Fatalf("id %d is in /etc/passwd", id)
	}
	if used[1000] && id == 1000 {
		t.Fatal("returned a used id")
	}
	// Our own uid (0) is in use by a running process.
	if id0, _ := UnusedID(0); id0 == 0 {
		t.Fatal("uid 0 reported unused")
	}
}
