// Package require is a stub of testify's require: the signatures the analyzer's tests use.
package require

import (
	"time"

	"github.com/stretchr/testify/assert"
)

type TestingT interface {
	Errorf(format string, args ...any)
	FailNow()
}

func NoError(t TestingT, err error, msgAndArgs ...any) {}

func Equal(t TestingT, expected, actual any, msgAndArgs ...any) {}

func Eventually(t TestingT, condition func() bool, waitFor, tick time.Duration, msgAndArgs ...any) {}

func Eventuallyf(t TestingT, condition func() bool, waitFor, tick time.Duration, msg string, args ...any) {
}

func Neverf(t TestingT, condition func() bool, waitFor, tick time.Duration, msg string, args ...any) {
}

func EventuallyWithT(t TestingT, condition func(collect *assert.CollectT), waitFor, tick time.Duration, msgAndArgs ...any) {
}
