package views

// RunState is a run's state as pages show it: its words, how it reads, its code for
// data attributes, and what the rules answer about it that a page needs. Handlers fill
// it from models/run (handlers/states.go), so no view types or compares a state's code
// (the repository's views_words_test.go checks that).
type RunState struct {
	// Words is the state as people read it, shown in the badge.
	Words string
	// Code is the state's code, for the badge's data-state attribute only: tests and
	// scripts read it there, people read Words.
	Code string
	Tone Tone
	// AwaitsApproval: the run waits for a person's approval. AwaitsOverride: it is
	// blocked by a soft-mandatory policy failure that waits for an override (or a
	// rejection).
	AwaitsApproval, AwaitsOverride bool
}

// Class is the state badge's CSS classes.
func (s RunState) Class() string { return s.Tone.Class() }

// RunKind is what a run intends, as pages show it: Words ("Dry run"), what it does
// (Means) and its code for data attributes.
type RunKind struct {
	Words, Means, Code string
}

// Coded is any other code a page shows in a badge (a policy evaluation's outcome, a
// drift check's finding): its words, how it reads, and the code for data attributes.
type Coded struct {
	Words, Code string
	Tone        Tone
}

// Class is the badge's CSS classes.
func (c Coded) Class() string { return c.Tone.Class() }

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
