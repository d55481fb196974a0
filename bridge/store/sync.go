// The syncer: a second goroutine that fsyncs transcripts and rewrites
// their sidecars at turn ends and once a second, so that a slow fsync
// never holds the writer up.

package store

import (
	"sync"
)

// syncer is the goroutine that fsyncs transcripts and rewrites their
// sidecars, off the writer's path. Jobs for one file coalesce: one fsync
// covers every write before it, and the newest listing data is the one
// written. The writer waits for a file's jobs before it closes, releases
// or deletes it, so that no sidecar is written after.
type syncer struct {
	mu    sync.Mutex
	queue []syncJob
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

type syncJob struct {
	sid string
	f   *file
}

// add asks for f to be fsynced (sync) and its sidecar written (meta), from
// the writer goroutine.
func (y *syncer) add(sid string, f *file, sync, meta bool) { y.addTitled(sid, f, sync, meta, nil) }

// addTitled is add, closing titled (if not nil) once the sidecar is
// written; meta must be set with it.
func (y *syncer) addTitled(sid string, f *file, sync, meta bool, titled chan struct{}) {
	y.mu.Lock()
	if titled != nil {
		f.snapTitled = titled
	}
	f.needSync = f.needSync || sync
	if meta {
		f.needMeta, f.snap = true, f.meta
	}
	if !f.queued {
		f.queued = true
		f.jobs.Add(1)
		y.queue = append(y.queue, syncJob{sid, f})
	}
	y.mu.Unlock()
	signal(y.wake)
}

func (y *syncer) run(s *Store) {
	defer close(y.done)
	var jobs []syncJob
	for {
		select {
		case <-y.wake:
		case <-y.stop:
			// The writer stopped after waiting for every file's jobs.
			return
		}
		y.mu.Lock()
		jobs, y.queue = y.queue, jobs[:0]
		y.mu.Unlock()
		for i, j := range jobs {
			jobs[i] = syncJob{}
			y.mu.Lock()
			f := j.f
			sync, meta, snap, titled := f.needSync, f.needMeta, f.snap, f.snapTitled
			f.queued, f.needSync, f.needMeta, f.snapTitled = false, false, false, nil
			y.mu.Unlock()
			if sync {
				if err := f.f.Sync(); err != nil {
					s.log.Warn("session transcript fsync failed", "session", j.sid, "error", err)
				}
			}
			if meta {
				if err := s.writeMeta(j.sid, snap); err != nil {
					s.log.Warn("session listing data not written (the last written is kept)", "session", j.sid, "error", err)
				}
			}
			if titled != nil {
				close(titled)
			}
			f.jobs.Done()
		}
	}
}

// flushAll flushes every open file; final when they are about to be
// closed.
func (s *Store) flushAll(final bool) {
	for sid, f := range s.files {
		s.flush(sid, f, final)
	}
}
