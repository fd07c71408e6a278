package views

// RunState is a run's state as pages show it: its name, how it reads, and what the
// rules answer about it that a page needs. Handlers fill it from models/run
// (handlers/states.go), so no view types or compares a state's name (the repository's
// views_words_test.go checks that).
type RunState struct {
	// Name is the state's name, shown as it is.
	Name string
	Tone Tone
	// AwaitsApproval: the run waits for a person's approval. AwaitsOverride: it is
	// blocked by a soft-mandatory policy failure that waits for an override (or a
	// rejection).
	AwaitsApproval, AwaitsOverride bool
}

// Class is the state badge's CSS classes.
func (s RunState) Class() string { return s.Tone.Class() }

// Tone is how a state reads on a page: the colour of its badge.
type Tone int

const (
	// TonePlain: no colour (the zero value).
	TonePlain Tone = iota
	// ToneBusy: on its way.
	ToneBusy
	// ToneOK: ended well.
	ToneOK
	// ToneBad: ended without doing what was asked, or failed.
	ToneBad
	// ToneWait: waits for a person.
	ToneWait
)

// Class is the CSS classes of a badge of tone t.
func (t Tone) Class() string {
	switch t {
	case ToneBusy:
		return "state state-busy"
	case ToneOK:
		return "state state-ok"
	case ToneBad:
		return "state state-bad"
	case ToneWait:
		return "state state-wait"
	}
	return "state"
}
