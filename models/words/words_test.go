package words

import "testing"

// TestCount: one is singular, every other count (zero and negative included) plural.
func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 events"}, {1, "1 event"}, {2, "2 events"}, {-1, "-1 events"}, {1398, "1398 events"}} {
		if got := Count(c.n, "event", "events"); got != c.want {
			t.Errorf("Count(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	if got := Count(1, "attempt in a row", "attempts in a row"); got != "1 attempt in a row" {
		t.Errorf("an int: %q", got)
	}
}
