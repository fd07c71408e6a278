// Command pause is the test cluster's pod sandbox ("pause") image: it holds the pod's
// namespaces open and does nothing until it is told to stop. Built statically by
// kubecluster.Start and imported into the cluster's containerd, so no registry is involved.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
