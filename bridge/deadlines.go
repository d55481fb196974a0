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
	queue []*request // oldest first; answered ones (deadline zero) wait to be dropped
	live  int        // requests in queue still timed
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
	for len(dl.queue) > 0 && dl.queue[0].deadline.IsZero() {
		dl.queue[0] = nil
		dl.queue = dl.queue[1:]
	}
	if len(dl.queue) > 64 && len(dl.queue) > 4*dl.live {
		q := make([]*request, 0, 2*dl.live)
		for _, r := range dl.queue {
			if !r.deadline.IsZero() {
				q = append(q, r)
			}
		}
		dl.queue = q
	}
	if len(dl.queue) == 0 {
		dl.queue = nil // (a burst's array is not kept)
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
	for len(dl.queue) > 0 {
		req := dl.queue[0]
		if !req.deadline.IsZero() && req.deadline.After(now) {
			e.setTimer(req.deadline.Sub(now))
			return
		}
		dl.queue[0] = nil
		dl.queue = dl.queue[1:]
		if req.deadline.IsZero() {
			continue
		}
		req.deadline = time.Time{}
		dl.live--
		e.timeout(req, req.timeout)
	}
	dl.queue = nil
}

// stopDeadlines stops the timer when the loop ends.
func (e *engine) stopDeadlines() {
	if t := e.deadlines.timer; t != nil {
		t.Stop()
	}
}
