package main

import (
	"bytes"
	"math"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// A flip the streams are waiting for: the CLA holds ADDRESS (healthy) or not.
type flip struct {
	at      time.Time
	pattern []byte // SocketAddress.address as encoded: tag, length, bytes
	healthy bool
}

func (f *flip) seenIn(cla []byte) bool {
	return bytes.Contains(cla, f.pattern) == f.healthy
}

type stream struct {
	locality [3]string
	recv     atomic.Int64 // bytes read from the connection
	sent     atomic.Int64
	// Guarded by driver.mu.
	delivered []float64 // per flip since the last settle: ms until this stream held it (NaN: not yet)
	responses int
	claBytes  int64
	lastAt    time.Time
	last      []byte // the last CLA, kept for one stream per locality (check)
	keep      bool
}

type driver struct {
	target  string
	delta   bool
	sources []net.IP // client source addresses, stream i dials from sources[i mod len] (none: the kernel's)
	// Connections being opened at once (a slot from the dial until its stream is open): a server that
	// accepts on a busy event loop is not sent more handshakes than it takes, on both sides alike.
	opening chan struct{}
	streams []*stream
	started time.Time
	mu      sync.Mutex
	flips   []*flip // since the last settle
	round   int     // settles so far: a flip index belongs to one round
	ready   int
	lastAny time.Time
}

func newDriver(target string, n int, localities [][3]string, delta bool, sources int) *driver {
	d := &driver{target: target, delta: delta, started: time.Now(), opening: make(chan struct{}, dialWindow)}
	// 127.0.0.2, 127.0.0.3, …: each its own set of ephemeral ports towards the one server address.
	for k := 0; k < sources; k++ {
		d.sources = append(d.sources, net.IPv4(127, 0, byte(k/250), byte(2+k%250)))
	}
	seen := map[[3]string]bool{}
	for i := 0; i < n; i++ {
		l := localities[i%len(localities)]
		d.streams = append(d.streams, &stream{locality: l, keep: !seen[l]})
		seen[l] = true
	}
	return d
}

// dialWindow is how many connections are opened at once: within Node's listen backlog (511), which
// ten thousand dials at once overflow (the kernel then drops or resets them, and clients time out).
const dialWindow = 128

// run starts every stream; they open their connections dialWindow at a time.
func (d *driver) run() {
	for i, s := range d.streams {
		go d.serve(i, s)
		if i%250 == 249 {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// received records one CLA on stream s (called from its own goroutine). The content search runs
// outside the lock: a stream's flips only ever go from pending to delivered.
func (d *driver) received(s *stream, cla []byte, size int) {
	now := time.Now()
	d.mu.Lock()
	round, flips := d.round, d.flips
	var pending []int
	for k := range flips {
		if k < len(s.delivered) && math.IsNaN(s.delivered[k]) {
			pending = append(pending, k)
		}
	}
	d.mu.Unlock()
	var seen []int
	for _, k := range pending {
		if flips[k].seenIn(cla) {
			seen = append(seen, k)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	s.responses++
	s.claBytes += int64(size)
	s.lastAt = now
	d.lastAny = now
	if s.keep {
		s.last = cla
	}
	if round != d.round {
		return
	}
	for _, k := range seen {
		s.delivered[k] = float64(now.Sub(flips[k].at).Microseconds()) / 1000
	}
}

// first marks stream s as holding its first CLA; the last one to do so reports ready.
func (d *driver) first() {
	d.mu.Lock()
	d.ready++
	done := d.ready == len(d.streams)
	var recv, sent []float64
	if done {
		// The initial sync's bytes; counting starts afresh for the flips.
		for _, s := range d.streams {
			recv = append(recv, float64(s.recv.Swap(0)))
			sent = append(sent, float64(s.sent.Swap(0)))
			s.responses, s.claBytes = 0, 0
		}
	}
	d.mu.Unlock()
	if done {
		say(map[string]any{
			"event": "ready", "streams": len(d.streams), "ms": time.Since(d.started).Milliseconds(),
			"recvBytes": median(recv), "sentBytes": median(sent),
		})
	}
}

func (d *driver) flip(address string, healthy bool) int {
	p := append([]byte{0x12, byte(len(address))}, address...)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.flips = append(d.flips, &flip{at: time.Now(), pattern: p, healthy: healthy})
	for _, s := range d.streams {
		s.delivered = append(s.delivered, math.NaN())
	}
	return len(d.flips)
}

type settled struct {
	Event     string      `json:"event"`
	TimedOut  bool        `json:"timedOut"`
	Missing   int         `json:"missing"`
	Delivered [][]float64 `json:"delivered"` // per flip, per stream: ms (-1: never)
	Responses []int       `json:"responses"`
	ClaBytes  []int64     `json:"claBytes"`
	RecvBytes []int64     `json:"recvBytes"`
}

// settle waits until every stream holds every flip and the streams have been quiet for `quiet`, then
// reports and starts counting afresh.
func (d *driver) settle(quiet, timeout time.Duration) settled {
	deadline := time.Now().Add(timeout)
	for {
		time.Sleep(20 * time.Millisecond)
		d.mu.Lock()
		missing := 0
		for _, s := range d.streams {
			for _, t := range s.delivered {
				if math.IsNaN(t) {
					missing++
				}
			}
		}
		if (missing == 0 && time.Since(d.lastAny) >= quiet) || time.Now().After(deadline) {
			r := settled{Event: "settled", TimedOut: missing > 0, Missing: missing}
			r.Delivered = make([][]float64, len(d.flips))
			for k := range d.flips {
				for _, s := range d.streams {
					t := s.delivered[k]
					if math.IsNaN(t) {
						t = -1
					}
					r.Delivered[k] = append(r.Delivered[k], t)
				}
			}
			for _, s := range d.streams {
				r.Responses = append(r.Responses, s.responses)
				r.ClaBytes = append(r.ClaBytes, s.claBytes)
				r.RecvBytes = append(r.RecvBytes, s.recv.Swap(0))
				s.responses, s.claBytes, s.delivered = 0, 0, nil
			}
			d.flips = nil
			d.round++
			d.mu.Unlock()
			return r
		}
		d.mu.Unlock()
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
