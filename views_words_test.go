package gantry_test

// TestViewsTypeNoRuleWords keeps issue 33's rule true: views get the rules' words and
// numbers from props (the rules' answers: run.ConfirmWord, Deciders.Summary, the window
// constants, the tier defaults) and run states as typed values (views.RunState), never
// typing them. It reads every template and hand-written Go file of views and fails on
//   - the confirm word (run.ConfirmWord), as a whole word;
//   - the default decision window in hours (from run.DefaultDecisionWindow), as a
//     whole number;
//   - a run state's name (run.States), quoted or bare, in markup, code or comments.
//
// State names are matched as run.States spells them: upper case, whole words (the
// underscore counts as part of a word, so PENDING_APPROVAL is one name). Several are
// also ordinary English words in lower case ("failed", "running", "stale", "planned"),
// which pages rightly use in prose; the upper-case spelling is the machine name, which
// only a copy of the state table would type. Comments are checked too: a comment naming
// states is where such a copy starts. TestViewsWordsRuleFires shows every kind fire.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gantry/models/run"
)

// viewWord is one thing a view may not type, and why.
type viewWord struct {
	re  *regexp.Regexp
	why string
}

// viewWords are the rule words and numbers no view types.
func viewWords() []viewWord {
	hours := strconv.Itoa(int(run.DefaultDecisionWindow / time.Hour))
	words := []viewWord{
		{regexp.MustCompile(`\b` + regexp.QuoteMeta(run.ConfirmWord) + `\b`),
			"the confirm word (run.ConfirmWord): pass it in as a prop"},
		{regexp.MustCompile(`(^|[^0-9])` + hours + `([^0-9]|$)`),
			"the default decision window in hours (run.DefaultDecisionWindow): pass the window constants in as props"},
	}
	for _, s := range run.States {
		words = append(words, viewWord{regexp.MustCompile(`\b` + regexp.QuoteMeta(string(s)) + `\b`),
			"the run state name " + string(s) + ": pass the state as a views.RunState, or what the page needs of it"})
	}
	return words
}

// viewWordProblems names, by file and line, every rule word typed in src.
func viewWordProblems(name string, src []byte) []string {
	var out []string
	words := viewWords()
	for i, line := range strings.Split(string(src), "\n") {
		for _, w := range words {
			if w.re.MatchString(line) {
				out = append(out, fmt.Sprintf("%s:%d: %s", name, i+1, w.why))
			}
		}
	}
	return out
}

// viewSources reads the templates and hand-written Go files of views (not the code
// templ generates from the templates, nor tests).
func viewSources(t *testing.T) map[string][]byte {
	t.Helper()
	paths, err := filepath.Glob("views/*")
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string][]byte{}
	templates := 0
	for _, p := range paths {
		switch {
		case strings.HasSuffix(p, ".templ"):
			templates++
		case strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_templ.go") && !strings.HasSuffix(p, "_test.go"):
		default:
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		srcs[p] = b
	}
	if templates < 10 {
		t.Fatalf("found %d templates in views: the check reads the wrong directory", templates)
	}
	return srcs
}

func TestViewsTypeNoRuleWords(t *testing.T) {
	t.Parallel()
	for name, src := range viewSources(t) {
		for _, p := range viewWordProblems(name, src) {
			t.Error(p)
		}
	}
}

// TestViewsWordsRuleFires plants one of each kind of rule word in template text and
// expects a report for each, and none for the prose and numbers a page may type.
func TestViewsWordsRuleFires(t *testing.T) {
	t.Parallel()
	hours := strconv.Itoa(int(run.DefaultDecisionWindow / time.Hour))
	planted := map[string]string{
		"confirm word":   `<label for="confirm">Type ` + run.ConfirmWord + ` to confirm</label>`,
		"window":         `<p class="hint">` + hours + ` hours = 7 days.</p>`,
		"quoted state":   `if r.State == "` + string(run.Succeeded) + `" {`,
		"bare state":     `case ` + string(run.PendingApproval) + `:`,
		"state in prose": `// StateNote explains a run that ended ` + string(run.Stale) + `.`,
	}
	for kind, line := range planted {
		problems := viewWordProblems("views/planted.templ", []byte("<div>\n"+line+"\n</div>"))
		t.Logf("%s: %q -> %q", kind, line, problems)
		if len(problems) != 1 || !strings.HasPrefix(problems[0], "views/planted.templ:2: ") {
			t.Errorf("%s: planted %q, got %q, want one report on line 2", kind, line, problems)
		}
	}
	for _, line := range []string{
		`<p>The run failed: a stale plan is planned again, or it is running.</p>`,
		`<a class="button secondary" id="destroy-workspace">Destroy…</a>`,
		`for _, m := range []int{15, 30, 60, 240, 720, 1440, 10080, 1` + hours + `0} {`,
		`<span class="badge">SIMULATED</span>`,
	} {
		if problems := viewWordProblems("views/planted.templ", []byte(line)); len(problems) > 0 {
			t.Errorf("%q is no rule word, got %q", line, problems)
		}
	}
}
