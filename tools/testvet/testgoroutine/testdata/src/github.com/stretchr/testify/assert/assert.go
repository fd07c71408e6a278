// Package assert is a stub of testify's assert: the signatures the analyzer's tests use.
package assert

import "time"

type TestingT interface {
	Errorf(format string, args ...any)
}

// CollectT collects a condition's failures; FailNow on it ends only the condition.
type CollectT struct{ failed bool }

func (c *CollectT) Errorf(format string, args ...any) { c.failed = true }
func (c *CollectT) FailNow()                          { c.failed = true }

func NoError(t TestingT, err error, msgAndArgs ...any) bool { return err == nil }

func Eventually(t TestingT, condition func() bool, waitFor, tick time.Duration, msgAndArgs ...any) bool {
	return condition()
}

func Never(t TestingT, condition func() bool, waitFor, tick time.Duration, msgAndArgs ...any) bool {
	return !condition()
}

func EventuallyWithT(t TestingT, condition func(collect *CollectT), waitFor, tick time.Duration, msgAndArgs ...any) bool {
	condition(new(CollectT))
	return true
}
