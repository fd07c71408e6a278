// Command hello is the test Job's image: it prints one line and exits.
package main

import "fmt"

func main() { fmt.Println("hello from a Job on the gantry test cluster") }
