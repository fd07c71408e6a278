// Command testvet is a go vet tool with one check, testgoroutine: it fails when a test
// calls require.*, t.Fatal*, t.FailNow or t.Skip* off the test's goroutine — inside a
// go statement, a wg.Go or errgroup Go function, or the condition of testify's
// Eventually/Never (which testify runs on a goroutine of its own) — directly or
// through a helper of this module that does (webtest.ReadBody, (*webtest.App).PostForm).
//
// Why: testing says FailNow must be called from the goroutine running the test.
// Called elsewhere it runs runtime.Goexit on that goroutine only: the test goes on
// with partial results, or waits forever for a goroutine that is gone. Keep the error
// and check it after the goroutine ends, report with t.Errorf, or use
// require.EventuallyWithT and fail through its *assert.CollectT.
//
// Run it through go vet (it needs the facts go vet passes between packages):
//
//	go build -o bin/testvet ./tools/testvet && go vet -vettool=bin/testvet ./...
package main

import (
	"golang.org/x/tools/go/analysis/unitchecker"

	"gantry/tools/testvet/testgoroutine"
)

func main() { unitchecker.Main(testgoroutine.Analyzer) }
