// SPDX-License-Identifier: GPL-2.0
//
// A Go program whose heap grows, for the host's agent: Go's runtime keeps a heap of its own
// (no malloc), which the agent sees grow in /proc and gives up tracing with the reason. It
// keeps 4,000 bytes more every 10 ms, prints "ready PID", and runs until its standard input
// ends.
package main

import (
	"fmt"
	"os"
	"time"
)

var kept [][]byte

func main() {
	fmt.Printf("ready %d\n", os.Getpid())
	go func() {
		buf := make([]byte, 1)
		os.Stdin.Read(buf)
		os.Exit(0)
	}()
	for range time.Tick(10 * time.Millisecond) {
		b := make([]byte, 4000)
		for i := range b {
			b[i] = 0x5a
		}
		kept = append(kept, b)
	}
}
