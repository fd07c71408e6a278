package handlers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"gantry/models/authz"
	"gantry/models/pages"
	"gantry/models/run"
	"gantry/views"
)

// The run page's live stream: the page's one EventSource (views.WithStream), carrying
//
//	run          the run's live section, after the run changed (#run-live, and its
//	             details and audit history out of band)
//	log-phase    the live log section, emptied for the phase now running (or for none)
//	log          the next chunk of that phase's log, to append; its SSE id is
//	             "<phase>-<seq>", so an EventSource that reconnects (Last-Event-ID)
//	             resumes after the last chunk it got: no chunk twice, none missed
//	inbox-count  the navigation's count, as the inbox stream sends it (inbox.go)
//	end          nothing more comes: the run is finished and the viewer has no count
//
// While the run waits in its workspace's apply queue, the other runs of the workspace
// move its place and its holder without a change of the run itself: the stream then
// also reads the run after every change of its workspace's runs (its version holds the
// queue, so only a place or holder that moved is sent). Any other page ignores them.
//
// Chunks are read from the database after a notice (any replica's worker may have
// written them), through the run service, which asks again each time whether the
// viewer may see the run.

// logPage is how many chunks one read takes.
const logPage = 200

// events serves the run page's live stream until the browser goes away (or end).
func (h Runs) events(c echo.Context) error {
	ctx := c.Request().Context()
	subject, err := authz.Require(ctx, authz.PermOrgRead)
	if err != nil {
		return err
	}
	s := &runStream{h: h, ctx: ctx, w: c.Response(), id: c.Param("id"), counts: views.ChromeFrom(ctx).CanApprove, count: -1}
	changes, unsubscribe := h.Changes.Subscribe(subject.OrganizationID, s.id)
	defer unsubscribe()
	logs, unsubscribeLog := h.Changes.SubscribeLog(subject.OrganizationID, s.id)
	defer unsubscribeLog()
	var others <-chan struct{} // any run of the organization: the count may have moved
	if s.counts {
		var unsubscribeOrg func()
		others, unsubscribeOrg = h.Changes.Subscribe(subject.OrganizationID, "")
		defer unsubscribeOrg()
	}
	// Read after subscribing (a change in between then still signals), and before the
	// stream starts: a run the reader may not see is a plain 404. A page that already
	// shows the current run gets no run event until it changes; that holds for a
	// finished run too, whose page keeps its stream for the count.
	live, changed, err := h.Pages.Live(ctx, s.id, sinceVersion(c.QueryParam("since")))
	if err != nil {
		return err
	}
	// Its workspace is known now; a move of it before this subscription is caught by
	// reading a waiting run once more as the stream starts (follow).
	workspace, unsubscribeWorkspace := h.Changes.SubscribeWorkspace(subject.OrganizationID, live.Run.WorkspaceID)
	defer unsubscribeWorkspace()
	startStream(s.w)
	err = s.serve(live, changed, c.Request().Header.Get("Last-Event-ID"), streams{changes, logs, others, workspace})
	if errors.Is(err, errGone) {
		return nil
	}
	return err
}

// sinceVersion is the version of the run a page was rendered with (its stream's since
// parameter), nil when there is none. A page's executor progress has no version: a run
// waiting for its executor is sent at once, its progress has likely moved.
func sinceVersion(since string) *pages.RunVersion {
	v, err := strconv.ParseInt(since, 10, 64)
	if err != nil {
		return nil
	}
	return &pages.RunVersion{UpdatedAt: time.Unix(0, v)}
}

// runStream is one run page's stream and what it has shown the page.
type runStream struct {
	h   Runs
	ctx context.Context
	w   *echo.Response
	id  string

	shown run.Run // the run as the page shows it
	// version is what the page shows: the run's version and the progress of its
	// executor's preparation, if the run waits for it.
	version pages.RunVersion
	// phase is the phase whose log the page's live log section shows, up to chunk seq;
	// inStep is false until the section is known to show it.
	phase  run.JobKind
	seq    int
	inStep bool

	counts bool  // the viewer has the navigation's count
	count  int64 // the count sent last (-1: none yet)
}

// streams are the signals a run page's stream follows: the run's changes, its live
// log's chunks, any run of the organization (the count) and any run of its workspace
// (the apply queue).
type streams struct {
	changes, logs, others, workspace <-chan struct{}
}

func (s *runStream) serve(live pages.RunLive, changed bool, lastEventID string, in streams) error {
	if err := s.catchUp(live, changed, lastEventID); err != nil {
		return err
	}
	if s.version.Queue != nil {
		// The queue read before the workspace's subscription may have moved since.
		if err := s.runChanged(); err != nil {
			return err
		}
	}
	return s.follow(in)
}

// catchUp brings the page to the run as live read it: its live section, its live log
// and the navigation's count.
func (s *runStream) catchUp(live pages.RunLive, changed bool, lastEventID string) error {
	if err := s.show(live, changed); err != nil {
		return err
	}
	// An EventSource reconnecting within the same phase resumes after its last chunk;
	// any other start shows the running phase's log afresh (the page may hold chunks
	// from an earlier connection that it cannot tell the server about).
	if phase, seq, ok := parseLogID(lastEventID); ok {
		if running, _ := s.shown.State.RunningPhase(); running == phase {
			s.phase, s.seq, s.inStep = phase, seq, true
		}
	}
	if err := s.syncLog(); err != nil {
		return err
	}
	return s.sendCount()
}

// follow sends what moves until the browser goes away, or the run is finished and the
// page has no count to keep.
func (s *runStream) follow(in streams) error {
	heartbeat := time.NewTicker(max(s.h.Heartbeat, time.Second))
	defer heartbeat.Stop()
	// The progress of an executor's preparation is no change of the run: no notice
	// carries it, so it is looked at every second while the run waits for it.
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	for {
		if s.shown.Finished() && !s.counts {
			// Tell the page to close the stream (sse-close="end"); a plain close would
			// make the browser reconnect.
			return write(s.w, "event: end\ndata: done\n\n")
		}
		var err error
		select {
		case <-s.ctx.Done():
			return nil
		case <-heartbeat.C:
			err = write(s.w, ": keep-alive\n\n")
		case <-in.changes:
			err = s.runChanged()
		case <-in.logs:
			err = s.sendChunks()
		case <-in.others:
			err = s.sendCount()
		case <-in.workspace:
			if s.version.Queue != nil {
				err = s.runChanged()
			}
		case <-progress.C:
			if s.version.Wait != nil {
				err = s.runChanged()
			}
		}
		if err != nil {
			return err
		}
	}
}

// runChanged shows the run as it is now, and its live log in step with it.
func (s *runStream) runChanged() error {
	live, changed, err := s.h.Pages.Live(s.ctx, s.id, &s.version)
	if err != nil {
		return err
	}
	if err := s.show(live, changed); err != nil {
		return err
	}
	return s.syncLog()
}

// show sends the run's live section as live reads it, unless the page shows that
// version already (changed false; a notice can come without a change: the listener
// reconnected and tells every page to look again).
func (s *runStream) show(live pages.RunLive, changed bool) error {
	if changed {
		if err := sendFragment(s.ctx, s.w, "run", views.RunEvent(liveProps(live))); err != nil {
			return err
		}
	}
	s.shown, s.version = live.Run, live.Version()
	return nil
}

// syncLog puts the live log section in step with the run shown: a phase other than the
// one it shows (or none) empties it for that phase; then the chunks it lacks follow.
func (s *runStream) syncLog() error {
	running, _ := s.shown.State.RunningPhase()
	if !s.inStep || running != s.phase {
		if err := sendFragment(s.ctx, s.w, "log-phase", views.LiveLog(views.LiveLogProps{Phase: string(running)})); err != nil {
			return err
		}
		s.phase, s.seq, s.inStep = running, 0, true
	}
	return s.sendChunks()
}

// sendChunks sends the chunks of the shown phase's log after the last one sent.
func (s *runStream) sendChunks() error {
	if s.phase == "" {
		return nil
	}
	for {
		chunks, err := s.h.Runs.LogChunks(s.ctx, s.id, s.phase, s.seq, logPage)
		if err != nil {
			return err
		}
		for _, c := range chunks {
			if err := sendEvent(s.ctx, s.w, "log", logID(c.Phase, c.Seq), views.LogChunk(c.Seq, c.Text)); err != nil {
				return err
			}
			s.seq = c.Seq
		}
		if len(chunks) < logPage {
			return nil
		}
	}
}

// sendCount sends the navigation's count if the viewer has one and it moved.
func (s *runStream) sendCount() error {
	if !s.counts {
		return nil
	}
	var err error
	s.count, err = s.h.sendInboxCount(s.ctx, s.w, s.count)
	return err
}

// logID is a chunk's SSE id.
func logID(phase run.JobKind, seq int) string { return fmt.Sprintf("%s-%d", phase, seq) }

// parseLogID reads a chunk's SSE id back (Last-Event-ID, from the browser).
func parseLogID(id string) (run.JobKind, int, bool) {
	phase, n, ok := strings.Cut(id, "-")
	seq, err := strconv.Atoi(n)
	if !ok || err != nil || seq < 1 {
		return "", 0, false
	}
	if k := run.JobKind(phase); run.LivePhase(k) {
		return k, seq, true
	}
	return "", 0, false
}
