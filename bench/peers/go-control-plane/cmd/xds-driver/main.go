// The stream driver of Canopy's peer benchmark: one binary for every server it is pointed at. K ADS
// streams (SotW, or delta with --delta), each on its own connection, each with a node in one of the
// given localities: each subscribes to CDS, then to the CLA its cluster names, and ACKs every response
// at once. --sources N spreads the connections over N source addresses (127.0.0.2…), so that ten
// thousand of them, opened pass after pass, never run short of ephemeral ports.
//
//	xds-driver --target HOST:PORT --streams K --localities FILE [--delta] [--sources N]
//
// FILE: a JSON array of [region, zone, subzone]; stream i takes entry i mod len.
//
// stdout, JSON lines: {"event":"ready","streams":K,"ms":…,"wire":{…}} once every stream has ACKed its
// first CLA; {"event":"error","detail":…} on a stream error. stdin, lines:
//
//	flip ADDRESS HEALTHY(0|1)  → {"event":"flipped","flip":N}: from now, time until each stream holds a CLA
//	                             in which ADDRESS is present (1) or absent (0)
//	settle QUIET_MS TIMEOUT_MS → {"event":"settled",…}: once every stream holds every flip so far and none has
//	                             had a response for QUIET_MS (or TIMEOUT_MS passed): each flip's delivery
//	                             times, responses and bytes per stream since the last settle
//	check FILE                 → {"event":"checked"}: per locality, a digest of the assignment its CLA decodes to
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

func main() {
	target := flag.String("target", "", "the server's xDS address")
	streams := flag.Int("streams", 100, "streams, one connection each")
	localitiesFile := flag.String("localities", "", "JSON array of [region, zone, subzone]")
	delta := flag.Bool("delta", false, "delta ADS instead of SotW")
	sources := flag.Int("sources", 0, "spread connections over this many source addresses 127.0.0.2… (0: the kernel's choice)")
	flag.Parse()
	var localities [][3]string
	if b, err := os.ReadFile(*localitiesFile); err != nil || json.Unmarshal(b, &localities) != nil || len(localities) == 0 || *target == "" {
		fmt.Fprintln(os.Stderr, "usage: xds-driver --target HOST:PORT --streams K --localities FILE")
		os.Exit(2)
	}
	d := newDriver(*target, *streams, localities, *delta, *sources)
	go d.run()
	commands(d)
}

var out = struct {
	sync.Mutex
	w *bufio.Writer
}{w: bufio.NewWriterSize(os.Stdout, 1<<20)}

func say(v any) {
	b, _ := json.Marshal(v)
	out.Lock()
	defer out.Unlock()
	out.w.Write(b)
	out.w.WriteByte('\n')
	out.w.Flush()
}

func commands(d *driver) {
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		f := strings.Fields(in.Text())
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "flip":
			if len(f) == 3 {
				say(map[string]any{"event": "flipped", "flip": d.flip(f[1], f[2] == "1")})
			}
		case "settle":
			if len(f) == 3 {
				quiet, _ := strconv.Atoi(f[1])
				timeout, _ := strconv.Atoi(f[2])
				go func() { say(d.settle(time.Duration(quiet)*time.Millisecond, time.Duration(timeout)*time.Millisecond)) }()
			}
		case "check":
			if len(f) == 2 {
				if err := d.check(f[1]); err != nil {
					say(map[string]any{"event": "error", "detail": err.Error()})
				}
				say(map[string]any{"event": "checked"})
			}
		}
	}
	os.Exit(0)
}
