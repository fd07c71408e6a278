package kube_test

import (
	"os"
	"testing"

	"gantry/models/db/dbtest"
)

func TestMain(m *testing.M) { os.Exit(dbtest.Main(m)) }
