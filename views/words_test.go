package views

import (
	"context"
	"strings"
	"testing"
)

// TestFailedAttemptsInWords: a webhook's failures read with the right plural.
func TestFailedAttemptsInWords(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{1: "1 failed attempt in a row", 2: "2 failed attempts in a row"} {
		var b strings.Builder
		if err := webhookState(WebhookRow{Enabled: true, Failures: n}).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) {
			t.Errorf("%d failures: %q does not say %q", n, b.String(), want)
		}
	}
}
