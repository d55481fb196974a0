package legacy

import (
	"sync"
	"sync/atomic"

	"github.com/acp-bridge/acp-bridge/bridge/slab"
)

// lineBlocks is where a child's stdout reader copies the lines it reads,
// once the link reads them with ReadBorrowed: blocks, numbered in the
// order the reader fills them, which come back to the reader once the
// link has read past their every line. A stream's lines then leave no
// garbage: copied each into memory of its own (a slab), a child's stream
// of updates brought a collection every few thousand lines, a tenth of the
// bridge's CPU in a perf profile.
//
// A block comes back when the link takes a line of a later block (take):
// the reader filled the earlier one before it, the queue hands lines over
// in order, so every line of the earlier block has been taken, and the
// caller of ReadBorrowed is done with the last one it took (it has read
// again). A line Read takes (not borrowed) is copied first.
type lineBlocks struct {
	lending atomic.Bool // ReadBorrowed was called: carve into blocks

	// The reader's: the block it fills and its number, and the number
	// of the block the line it read last lies in (0: its own memory).
	cur  []byte
	seq  uint64
	last uint64
	slab slab.Slab // before lending, and for lines too long to carve

	// Read's: the latest block a line was taken from, and where Read
	// copies a line it takes from a block.
	taken uint64
	own   slab.Slab

	mu    sync.Mutex
	lent  []lentBlock // blocks the reader has started, oldest first
	spare [][]byte    // blocks back from the link, for the reader
	made  int         // blocks made in all (TestProcessLendsLines)
}

type lentBlock struct {
	seq uint64
	b   []byte
}

const (
	// lentBlockSize is the size of the blocks; a line longer than
	// maxLentLine is copied into a slab, or memory of its own, as before.
	lentBlockSize = 64 << 10
	maxLentLine   = slab.MaxCarved
	// spareBlocks bounds the blocks kept for the reader: the queue holds
	// up to maxQueuedBytes, a stream's blocks in flight.
	spareBlocks = maxQueuedBytes/lentBlockSize + 2
)

// carve returns a copy of line (ndjson.Reader.Carve), in the block being
// filled when lending, and sets last. Called by the stdout reader.
func (lb *lineBlocks) carve(line []byte) []byte {
	if len(line) > maxLentLine || !lb.lending.Load() {
		lb.last = 0
		return lb.slab.Copy(line)
	}
	if cap(lb.cur)-len(lb.cur) < len(line) {
		lb.next()
	}
	at := len(lb.cur)
	lb.cur = append(lb.cur, line...)
	lb.last = lb.seq
	return lb.cur[at:len(lb.cur):len(lb.cur)]
}

// next starts a new block, a spare one if there is one.
func (lb *lineBlocks) next() {
	lb.mu.Lock()
	var b []byte
	if k := len(lb.spare); k > 0 {
		b, lb.spare[k-1] = lb.spare[k-1][:0], nil
		lb.spare = lb.spare[:k-1]
	} else {
		b = make([]byte, 0, lentBlockSize)
		lb.made++
	}
	lb.seq++
	lb.lent = append(lb.lent, lentBlock{lb.seq, b})
	lb.mu.Unlock()
	lb.cur = b
}

// take returns the frame of f as the link gets it: borrowed when it lies
// in a block and borrow is set, else a copy of the caller's own. Taking
// the first line of a block gives back every block before it. Called by
// Read's goroutine.
func (lb *lineBlocks) take(f queuedFrame, borrow bool) ([]byte, bool) {
	if f.block == 0 {
		return f.frame, false
	}
	if f.block != lb.taken {
		lb.taken = f.block
		lb.giveBack(f.block)
	}
	if borrow {
		return f.frame, true
	}
	return lb.own.Copy(f.frame), false
}

// giveBack returns the blocks numbered below seq to the reader.
func (lb *lineBlocks) giveBack(seq uint64) {
	lb.mu.Lock()
	i := 0
	for ; i < len(lb.lent) && lb.lent[i].seq < seq; i++ {
		if len(lb.spare) < spareBlocks {
			lb.spare = append(lb.spare, lb.lent[i].b)
		}
	}
	n := copy(lb.lent, lb.lent[i:])
	clear(lb.lent[n:])
	lb.lent = lb.lent[:n]
	lb.mu.Unlock()
}
