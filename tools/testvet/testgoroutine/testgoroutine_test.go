package testgoroutine_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"gantry/tools/testvet/testgoroutine"
)

// TestAnalyzer runs the analyzer over testdata/src: gantry/fixture plants a violation
// of every rule (go statement, wg.Go, an errgroup-like Go, Eventually/Never
// conditions, helpers of the same package and of gantry/helpers through their facts)
// next to the code that must stay silent; the want comments are the expectations,
// facts included. testify is a stub in testdata/src, testing the standard library.
func TestAnalyzer(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), testgoroutine.Analyzer, "gantry/fixture", "gantry/helpers")
}
