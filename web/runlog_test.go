package web_test

import (
	"bufio"
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/require"

	"gantry/bench"
	"gantry/cmd/gantry/webtest"
	"gantry/models/run"
	"gantry/runner"
	"gantry/runner/mock"
	"gantry/views/paths"
)

// liveSecret is the value of a sensitive input of the test's runs: their live logs
// mask it wherever it shows.
const liveSecret = "quokka-hush-7xv2q"

// sensitiveBucketCatalog is the shipped catalog with the bucket's name marked
// sensitive.
func sensitiveBucketCatalog(t testing.TB) fstest.MapFS {
	t.Helper()
	m := catalogWith(t, nil)
	manifest := string(m["templates/bucket/template.yaml"].Data)
	marked := strings.Replace(manifest, "    help: Lower-case bucket name, 3 to 41 characters, starting with a letter.\n",
		"    help: Lower-case bucket name, 3 to 41 characters, starting with a letter.\n    sensitive: true\n", 1)
	require.NotEqual(t, manifest, marked, "the test's edit of the bucket manifest must apply")
	m["templates/bucket/template.yaml"] = &fstest.MapFile{Data: []byte(marked)}
	return m
}

// heldPlan is the mock, except that its first plan writes two lines of its own to the
// live log (the second holds the run's secret, split across two writes), then holds
// the phase open until the test releases it, writing each line the test says
// meanwhile: a phase that lasts as long as the test needs, with no clock involved.
type heldPlan struct {
	runner.Runner
	once    sync.Once
	held    chan struct{} // closed once the first plan wrote its lines and waits
	say     chan string
	release chan struct{}
}

func newHeldPlan() *heldPlan {
	return &heldPlan{Runner: mock.New(), held: make(chan struct{}), say: make(chan string), release: make(chan struct{})}
}

func (h *heldPlan) Plan(ctx context.Context, req runner.PlanRequest) (runner.PlanResult, error) {
	first := false
	h.once.Do(func() { first = true })
	if first {
		out := runner.LogTo(req.Log)
		fmt.Fprint(out, "held: the test holds this plan\n")
		fmt.Fprint(out, "secret: "+liveSecret[:8])
		fmt.Fprint(out, liveSecret[8:]+" (printed by a careless provider)\n")
		close(h.held)
	hold:
		for {
			select {
			case line := <-h.say:
				fmt.Fprint(out, line)
			case <-h.release:
				break hold
			case <-ctx.Done():
				return runner.PlanResult{}, ctx.Err()
			}
		}
	}
	return h.Runner.Plan(ctx, req)
}

// sseEvent is one event of a live stream.
type sseEvent struct{ name, id, data string }

// sseStream reads a live stream's events as they come.
type sseStream struct {
	events chan sseEvent
	seen   []sseEvent // every event read so far
	cancel context.CancelFunc
	status int
}

// openStream opens path as an EventSource would (lastEventID "" when it is not a
// reconnection), with c's cookies but no overall timeout: a stream lasts.
func openStream(t *testing.T, app *webtest.App, c *http.Client, path, lastEventID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, app.URL+path, nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	streaming := *c
	streaming.Timeout = 0
	resp, err := streaming.Do(req)
	require.NoError(t, err)
	s := &sseStream{events: make(chan sseEvent, 1024), cancel: cancel, status: resp.StatusCode}
	go func() {
		defer close(s.events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			case line == "" && ev.name != "":
				ev.data = strings.Join(data, "\n")
				s.events <- ev
				ev, data = sseEvent{}, nil
			}
		}
	}()
	return s
}

// until reads events until done says so of all the events read so far, and returns
// them. A stream that ends first, or sends nothing more for a minute of idle-machine time
// (a hang, not a timing assertion), fails the test.
func (s *sseStream) until(t *testing.T, what string, done func([]sseEvent) bool) []sseEvent {
	t.Helper()
	if done(s.seen) {
		return s.seen
	}
	receiveUntil(t, what+" on the stream", time.Minute, s.events, func(ev sseEvent) bool {
		s.seen = append(s.seen, ev)
		return done(s.seen)
	}, func() any { return names(s.seen) })
	return s.seen
}

// receiveUntil receives values from ch until done holds for one, and returns it, within
// base of idle-machine time for the whole wait (bench.Receive's budget, over many
// values). A closed ch or a spent budget fails the test, saying what it waited for and
// what seen reports.
func receiveUntil[T any](t testing.TB, what string, base time.Duration, ch <-chan T, done func(T) bool, seen func() any) T {
	t.Helper()
	b := bench.NewBudget(base)
	for {
		timer := time.NewTimer(min(b.Left(), time.Second) + time.Millisecond)
		select {
		case v, ok := <-ch:
			timer.Stop()
			if !ok {
				t.Fatalf("waited for %s: it ended first; it sent %v", what, seen())
			}
			if done(v) {
				return v
			}
		case <-timer.C:
		}
		// Checked after values too: a stream that keeps sending other things spends the
		// budget as one that sends nothing does.
		if b.Spent() {
			t.Fatalf("waited for %s: not within %s; it sent %v", what, b, seen())
		}
	}
}

func names(evs []sseEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.name + "#" + ev.id
	}
	return out
}

var chunkText = regexp.MustCompile(`(?s)^<span data-seq="(\d+)">(.*)</span>$`)

// logText is the text of the "log" events among evs, unescaped as a browser shows it.
func logText(t *testing.T, evs []sseEvent) string {
	var b strings.Builder
	for _, ev := range evs {
		if ev.name != "log" {
			continue
		}
		m := chunkText.FindStringSubmatch(ev.data)
		require.NotNil(t, m, "a log event is one chunk: %q", ev.data)
		require.Equal(t, ev.id, strings.SplitN(ev.id, "-", 2)[0]+"-"+m[1], "the SSE id names the chunk")
		b.WriteString(m[2])
	}
	return html.UnescapeString(b.String())
}

// requireChunksInOrder checks the invariant of the log events among evs: after each
// log-phase event (which names the phase its section now shows), that phase's chunks
// follow numbered from 1 without gaps or repeats; before any, chunks follow from first
// on (a resumed stream), in phase.
func requireChunksInOrder(t *testing.T, evs []sseEvent, phase string, first int) {
	t.Helper()
	next := first
	for _, ev := range evs {
		switch ev.name {
		case "log-phase":
			phase, next = "", 1
			if m := dataPhase.FindStringSubmatch(ev.data); m != nil {
				phase = m[1]
			}
		case "log":
			require.NotEmpty(t, phase, "a chunk while no phase runs: %v", names(evs))
			require.Equal(t, phase+"-"+strconv.Itoa(next), ev.id, "chunks in order, each once: %v", names(evs))
			next++
		}
	}
}

var dataPhase = regexp.MustCompile(`data-phase="([a-z]+)"`)

// TestLiveLogStream: while a phase runs, the run page's stream appends the chunks of
// its log as they are stored, each with its SSE id, in order and masked; a reconnection
// with Last-Event-ID, to another replica, resumes after the last chunk it got (nothing
// twice, nothing missed); each next phase starts afresh and, at the end, the whole log is in the run's
// section as stored. The same stream carries the navigation's count, and the page
// opens no other. Another organization's run, or a run in a restricted environment
// without a grant, has no stream (404); the chunks in the database are ciphertext.
func TestLiveLogStream(t *testing.T) {
	t.Parallel()
	held := newHeldPlan()
	app := webtest.StartWith(t, webtest.Options{Runner: held, CatalogFS: sensitiveBucketCatalog(t)})
	operator := app.LoggedIn(t, "operator@acme.test")
	dev := app.OrgEnvironmentID(t, "acme", "development")
	runID := app.RequestRun(t, operator, url.Values{"template": {"bucket"}, "environment": {dev}, "workspace": {"chatty"},
		"kind": {"apply"}, "inputs.name": {liveSecret}})
	bench.Receive(t, "the held plan to start", time.Minute, held.held)

	// The page, mid-plan: one stream (the run's, on the body), the live log section
	// ready for the plan's log.
	page := webtest.ReadBody(t, app.Get(t, operator, paths.Run(runID)))
	require.Regexp(t, `<body[^>]* hx-ext="sse" sse-connect="/runs/`+runID+`/events\?since=\d+" sse-close="end"`, page)
	require.Equal(t, 1, strings.Count(page, "sse-connect="), "one stream per tab")
	require.NotContains(t, page, paths.InboxEvents(), "the run's stream carries the count")
	require.Contains(t, page, `data-testid="live-log" data-phase="plan"`)
	require.Contains(t, page, `id="inbox-count" sse-swap="inbox-count"`)
	home := webtest.ReadBody(t, app.Get(t, operator, "/"))
	require.Contains(t, home, `sse-connect="`+paths.InboxEvents()+`"`, "other pages keep the inbox stream")

	// 1. The stream: the run, the plan's log section afresh, the chunks so far, the count.
	first := openStream(t, app, operator, "/runs/"+runID+"/events", "")
	require.Equal(t, http.StatusOK, first.status)
	evs := first.until(t, "the held plan's lines and the count", func(evs []sseEvent) bool {
		return strings.Contains(logText(t, evs), "provider)\n") && slices.ContainsFunc(evs, func(e sseEvent) bool { return e.name == "inbox-count" })
	})
	require.Equal(t, "run", evs[0].name)
	require.Contains(t, evs[0].data, `data-testid="run-state" `+shownState(run.Planning))
	require.Equal(t, "log-phase", evs[1].name)
	require.Contains(t, evs[1].data, `data-phase="plan"`)
	requireChunksInOrder(t, evs, "", 1)
	require.Equal(t, "held: the test holds this plan\nsecret: "+runner.Masked+" (printed by a careless provider)\n", logText(t, evs))
	for _, ev := range evs {
		for i := 0; i+6 <= len(liveSecret); i++ {
			require.NotContains(t, ev.data, liveSecret[i:i+6], "a piece of the secret is on the stream")
		}
	}
	last := ""
	for _, ev := range evs {
		if ev.name == "log" {
			last = ev.id
		}
	}
	first.cancel()

	// 2. The browser reconnects with the last id it got, to another replica (on the same
	// database, with its own listener) this time; the plan, held by the first replica's
	// worker, writes on meanwhile.
	replica := webtest.RestartWith(t, app, webtest.Options{CatalogFS: sensitiveBucketCatalog(t)})
	second := openStream(t, replica, replica.LoggedIn(t, "operator@acme.test"), "/runs/"+runID+"/events", last)
	require.Equal(t, http.StatusOK, second.status)
	second.until(t, "the run at connect", func(evs []sseEvent) bool { return len(evs) > 0 })
	held.say <- "after the reconnection\n"
	evs = second.until(t, "the line written after the reconnection", func(evs []sseEvent) bool {
		return strings.Contains(logText(t, evs), "after the reconnection\n")
	})
	lastSeq, err := strconv.Atoi(strings.TrimPrefix(last, "plan-"))
	require.NoError(t, err)
	requireChunksInOrder(t, evs, "plan", lastSeq+1)
	require.Equal(t, "after the reconnection\n", logText(t, evs), "nothing sent twice, nothing missed")
	for _, ev := range evs {
		require.NotEqual(t, "log-phase", ev.name, "the same phase resumes: its section is not emptied")
	}

	// 3. The phases go on to the end: each phase's section afresh, then none, and the
	// whole logs in the run's section.
	close(held.release)
	evs = second.until(t, "the run's end", func(evs []sseEvent) bool {
		return slices.ContainsFunc(evs, func(e sseEvent) bool { return e.name == "run" && strings.Contains(e.data, shownState(run.Succeeded)) })
	})
	requireChunksInOrder(t, evs, "plan", lastSeq+1)
	// The section is emptied when the run leaves its last phase: before or after the
	// run's own SUCCEEDED event, as the two changes reach the stream (the order is not
	// the subject); what counts is that the last log-phase event empties it.
	evs = second.until(t, "the live log section emptied", func(evs []sseEvent) bool {
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].name == "log-phase" {
				return !dataPhase.MatchString(evs[i].data)
			}
		}
		return false
	})
	var final string
	for _, ev := range evs {
		if ev.name == "run" {
			final = ev.data
		}
	}
	for _, id := range []string{`id="plan-log"`, `id="apply-log"`, `id="verify-log"`, `hx-swap-oob="innerHTML"`, "run.succeeded"} {
		require.Contains(t, final, id, "the finished run's section shows its logs as stored, and its history")
	}
	// The stored logs are masked like the live one: the mock's plan log shows the
	// sensitive name as tofu does, "(sensitive value)"; its apply log prints the url
	// output, which the provider built from the name.
	logs := regexp.MustCompile(`(?s)<pre id="(?:plan|apply|verify)-log"[^>]*>(.*?)</pre>`).FindAllStringSubmatch(final, -1)
	require.Len(t, logs, 3)
	require.Contains(t, logs[0][1], "name           = (sensitive value)")
	require.Contains(t, logs[1][1], runner.Masked)
	for _, l := range logs {
		for i := 0; i+6 <= len(liveSecret); i++ {
			require.NotContains(t, l[1], liveSecret[i:i+6], "a piece of the secret is in a stored log")
		}
	}
	second.cancel()

	// 4. Nobody else streams it.
	globex := app.LoggedIn(t, "owner@globex.test")
	other := openStream(t, app, globex, "/runs/"+runID+"/events", "")
	require.Equal(t, http.StatusNotFound, other.status, "another organization's run has no stream")
	viewer := app.LoggedIn(t, "viewer@acme.test")
	require.NoError(t, app.DB.Exec("UPDATE environments SET restricted = true WHERE id = ?", dev).Error)
	hidden := openStream(t, app, viewer, "/runs/"+runID+"/events", "")
	require.Equal(t, http.StatusNotFound, hidden.status, "a run in a restricted environment without a grant has no stream")

	// 5. What the database holds of the live log is ciphertext.
	var stored []byte
	require.NoError(t, app.DB.Raw(`SELECT string_agg(ciphertext || wrapped_key || nonce, '\x00'::bytea) FROM run_log_chunks WHERE run_id = ?`, runID).
		Row().Scan(&stored))
	require.NotEmpty(t, stored)
	for _, clear := range []string{"held: the test", "after the reconnection", "SIMULATED", liveSecret, liveSecret[:8], runner.Masked} {
		require.NotContains(t, string(stored), clear, "the live log table holds something in clear")
	}
}

// TestFinishedRunPageStreamSendsNoRunAgain: the page of a finished run keeps its stream
// for an approver's inbox count; at connect it is sent the count, not the run's section
// again (the page shows that version already, and swapping identical HTML would take
// the reader's focus and place), while a page that showed an older version gets it.
func TestFinishedRunPageStreamSendsNoRunAgain(t *testing.T) {
	t.Parallel()
	app := webtest.Start(t)
	operator := app.LoggedIn(t, "operator@acme.test")
	admin := app.LoggedIn(t, "admin@acme.test")
	req := bucketRequest(app.OrgEnvironmentID(t, "acme", "development"), "eu-west")
	req.Set("workspace", "finished-stream")
	r := waitForState(t, app, app.RequestRun(t, operator, req), run.Succeeded)

	counted := func(evs []sseEvent) bool {
		return slices.ContainsFunc(evs, func(e sseEvent) bool { return e.name == "inbox-count" })
	}
	current := openStream(t, app, admin, "/runs/"+r.ID+"/events?since="+strconv.FormatInt(r.UpdatedAt.UnixNano(), 10), "")
	require.Equal(t, http.StatusOK, current.status)
	evs := current.until(t, "the count", counted)
	require.False(t, slices.ContainsFunc(evs, func(e sseEvent) bool { return e.name == "run" }), "the run's section again: %v", evs)
	current.cancel()

	older := openStream(t, app, admin, "/runs/"+r.ID+"/events?since="+strconv.FormatInt(r.CreatedAt.UnixNano(), 10), "")
	evs = older.until(t, "the count", counted)
	require.True(t, slices.ContainsFunc(evs, func(e sseEvent) bool { return e.name == "run" && strings.Contains(e.data, shownState(run.Succeeded)) }),
		"a page that showed an older version is sent the run as it is: %v", evs)
	older.cancel()
}
