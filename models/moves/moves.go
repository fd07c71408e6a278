// Package moves is the log of state moves an entity keeps between its read and its
// save: a run's or a break-glass window's pure transition methods add to it, and the
// save that persists the entity writes one audit event for each move, in order. It is a
// leaf, so that both entities keep their moves the same way.
package moves

import "maps"

// Move is one transition from From to To, with why (Reason) and what the decision bound
// (Data, written into the move's audit event; nil: nothing more).
type Move[S any] struct {
	From, To S
	Reason   string
	Data     map[string]any
}

// Log is the moves made since the entity was read, oldest first. Its zero value is an
// empty log. An entity keeps it in an unexported field, which gorm ignores.
type Log[S any] []Move[S]

// Add records a move from from to to.
func (l *Log[S]) Add(from, to S, reason string, data map[string]any) {
	*l = append(*l, Move[S]{From: from, To: to, Reason: reason, Data: data})
}

// Last is the newest move, to change what it records; nil when there is none.
func (l Log[S]) Last() *Move[S] {
	if len(l) == 0 {
		return nil
	}
	return &l[len(l)-1]
}

// Annotate adds data to what the newest move bound (its audit event); with no move it
// does nothing.
func (l Log[S]) Annotate(data map[string]any) {
	m := l.Last()
	if m == nil {
		return
	}
	if m.Data == nil {
		m.Data = map[string]any{}
	}
	maps.Copy(m.Data, data)
}
