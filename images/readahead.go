package images

import (
	"errors"
	"io"
	"sync"
)

// readAhead reads a layer's stream (decompression, and the diff id's hash where one is checked)
// in its own goroutine, a few chunks ahead of the unpacker: the CPU work of getting the bytes
// overlaps the writing of files, as GNU tar -xz overlaps gzip's process with its own. Without it
// the two take turns on one core (BenchmarkUnpackPythonLayer measures the difference).
type readAhead struct {
	full  chan []byte // chunks read, in order; closed after the last, with err set
	free  chan []byte // chunks the reader may fill again
	done  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	err   error  // why the stream ended (io.EOF at its end); set before full is closed
	whole []byte // the chunk being consumed, whole, to give back
	cur   []byte // what is left of it
}

const (
	readAheadChunk = 1 << 20
	readAheadDepth = 4
)

func newReadAhead(src io.Reader) *readAhead {
	r := &readAhead{full: make(chan []byte, readAheadDepth), free: make(chan []byte, readAheadDepth+1), done: make(chan struct{})}
	for range readAheadDepth + 1 {
		r.free <- make([]byte, readAheadChunk)
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			var buf []byte
			select {
			case buf = <-r.free:
			case <-r.done:
				return
			}
			n, err := io.ReadFull(src, buf)
			if n > 0 {
				select {
				case r.full <- buf[:n]:
				case <-r.done:
					return
				}
			}
			if err != nil {
				if errors.Is(err, io.ErrUnexpectedEOF) {
					err = io.EOF // a short last chunk: the stream's end
				}
				r.err = err
				close(r.full)
				return
			}
		}
	}()
	return r
}

func (r *readAhead) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(r.cur) == 0 {
		if r.whole != nil {
			r.free <- r.whole[:cap(r.whole)]
			r.whole = nil
		}
		b, ok := <-r.full
		if !ok {
			return 0, r.err
		}
		r.whole, r.cur = b, b
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// Close stops the reading goroutine and waits for it, so that the stream below may be closed.
func (r *readAhead) Close() error {
	r.once.Do(func() { close(r.done) })
	r.wg.Wait()
	return nil
}
