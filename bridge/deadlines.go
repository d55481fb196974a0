package bridge

import "time"

// Request timeouts, without a runtime timer for each request.
//
// Each timed request used to start its own time.AfterFunc. A runtime timer
// that fires earlier than every one already set wakes the thread that
// sleeps in the network poller: a futex wake-up and a context switch on
// the path of every echo, an eighth of the futex calls of a run of them.
// Every timed request of an engine gets the same timeout, so deadlines
// come in the order requests were armed: a queue, with one timer set for
// the oldest deadline still pending, serves them all.

// deadlines is the queue of timed requests. It belongs to the loop.
type deadlines struct {
	// queue[head:] are the armed requests, oldest first; answered ones
	// (deadline zero) wait there to be dropped. The array is reused: a
	// request costs no allocation.
	queue []*request
	head  int
	live  int // requests in queue still timed
	timer *time.Timer
	set   bool // timer will fire
}

// arm gives req the deadline now+d. The loop's post runs expire when the
// oldest deadline passes.
func (e *engine) arm(req *request, d time.Duration) {
	dl := &e.deadlines
	req.deadline = time.Now().Add(d)
	req.timeout = d
	dl.queue = append(dl.queue, req)
	dl.live++
	if !dl.set {
		e.setTimer(d)
	}
}

// disarm takes req's deadline away (answered, or timed again later).
func (e *engine) disarm(req *request) {
	if req.deadline.IsZero() {
		return
	}
	dl := &e.deadlines
	req.deadline = time.Time{}
	dl.live--
	// Drop answered requests from the front, where they usually are (a
	// request answered in order); compact when one slow request holds
	// many answered ones behind it.
	for dl.head < len(dl.queue) && dl.queue[dl.head].deadline.IsZero() {
		dl.pop()
	}
	if n := len(dl.queue) - dl.head; n > 64 && n > 4*dl.live {
		q := dl.queue[:0]
		for _, r := range dl.queue[dl.head:] {
			if !r.deadline.IsZero() {
				q = append(q, r)
			}
		}
		clear(dl.queue[len(q):])
		dl.queue, dl.head = q, 0
	}
}

// pop drops the oldest request from the queue.
func (dl *deadlines) pop() {
	dl.queue[dl.head] = nil
	dl.head++
	if dl.head == len(dl.queue) {
		dl.head = 0
		if cap(dl.queue) > 1024 {
			dl.queue = nil // (a burst's array is not kept)
		} else {
			dl.queue = dl.queue[:0]
		}
	}
}

func (e *engine) setTimer(d time.Duration) {
	dl := &e.deadlines
	dl.set = true
	if dl.timer == nil {
		dl.timer = time.AfterFunc(d, func() { e.post(e.expire) })
		return
	}
	dl.timer.Reset(d)
}

// expire times out every request whose deadline has passed, and sets the
// timer for the next. A late or repeated call finds nothing due.
func (e *engine) expire() {
	dl := &e.deadlines
	dl.set = false
	now := time.Now()
	for dl.head < len(dl.queue) {
		req := dl.queue[dl.head]
		if !req.deadline.IsZero() && req.deadline.After(now) {
			e.setTimer(req.deadline.Sub(now))
			return
		}
		dl.pop()
		if req.deadline.IsZero() {
			continue
		}
		req.deadline = time.Time{}
		dl.live--
		e.timeout(req, req.timeout)
	}
}

// stopDeadlines stops the timer when the loop ends.
func (e *engine) stopDeadlines() {
	if t := e.deadlines.timer; t != nil {
		t.Stop()
	}
}
