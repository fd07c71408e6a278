package main

import (
	"testing"
	"time"

	"gantry/runner/tofu"
)

func TestProgressLine(t *testing.T) {
	var p tofu.BuildProgress
	if got := progressLine(&p, 1500*time.Millisecond); got != "OpenTofu: checking bin/tofu, 2s" {
		t.Errorf("before anything is counted: %q", got)
	}
	p.SetStep("waiting for another process building OpenTofu")
	if got := progressLine(&p, 61*time.Second); got != "OpenTofu: waiting for another process building OpenTofu, 1m1s" {
		t.Errorf("waiting: %q", got)
	}
}
