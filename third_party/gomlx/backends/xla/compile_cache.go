package xla

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"k8s.io/klog/v2"
)

// executableCache keeps the executables a Backend compiled, keyed by their StableHLO program and
// compile configuration, so that compiling the same program again in the same process (a second
// context.Exec of an identical graph: a resumed run, a new model of the same shapes) reuses the
// loaded executable instead of running XLA's compiler anew. Executables in use are never evicted;
// of the unused ones, the executableCacheIdle most recently used are kept.
type executableCache struct {
	mu      sync.Mutex
	entries map[[32]byte]*cachedExecutable
	clock   uint64
	hits    int
}

type cachedExecutable struct {
	exec     *pjrt.LoadedExecutable
	refs     int
	lastUsed uint64
}

// executableCacheIdle is how many executables no Executable uses are kept.
const executableCacheIdle = 64

// compileKey identifies a compilation: the program and how it is placed on the devices.
func compileKey(program []byte, strategy distributed.Strategy, numDevices int, assignment []int) [32]byte {
	h := sha256.New()
	var n [8]byte
	for _, v := range append([]int{int(strategy), numDevices, len(assignment)}, assignment...) {
		binary.LittleEndian.PutUint64(n[:], uint64(v))
		h.Write(n[:])
	}
	h.Write(program)
	var key [32]byte
	h.Sum(key[:0])
	return key
}

// acquire returns the cached executable of key, now referenced once more, or nil.
func (c *executableCache) acquire(key [32]byte) *pjrt.LoadedExecutable {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		return nil
	}
	c.clock++
	e.refs++
	e.lastUsed = c.clock
	c.hits++
	return e.exec
}

// add records exec, just compiled, as key's, referenced once, and returns the executable to use: exec, or
// the one another compilation of the same key added meanwhile (exec is then destroyed).
func (c *executableCache) add(key [32]byte, exec *pjrt.LoadedExecutable) *pjrt.LoadedExecutable {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clock++
	if e := c.entries[key]; e != nil {
		e.refs++
		e.lastUsed = c.clock
		if err := exec.Destroy(); err != nil {
			klog.Warningf("Error while destroying a duplicate executable: %+v", err)
		}
		return e.exec
	}
	if c.entries == nil {
		c.entries = map[[32]byte]*cachedExecutable{}
	}
	c.entries[key] = &cachedExecutable{exec: exec, refs: 1, lastUsed: c.clock}
	return exec
}

// release drops one reference to key's executable and destroys the least recently used unreferenced
// executables beyond executableCacheIdle.
func (c *executableCache) release(key [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil {
		return
	}
	e.refs--
	for {
		idle := 0
		var oldestKey [32]byte
		var oldest *cachedExecutable
		for k, v := range c.entries {
			if v.refs > 0 {
				continue
			}
			idle++
			if oldest == nil || v.lastUsed < oldest.lastUsed {
				oldestKey, oldest = k, v
			}
		}
		if idle <= executableCacheIdle {
			return
		}
		delete(c.entries, oldestKey)
		if err := oldest.exec.Destroy(); err != nil {
			klog.Warningf("Error while destroying a cached executable: %+v", err)
		}
	}
}

// destroyAll destroys every cached executable (the backend is being finalized).
func (c *executableCache) destroyAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if err := e.exec.Destroy(); err != nil {
			klog.Warningf("Error while destroying a cached executable: %+v", err)
		}
		delete(c.entries, k)
	}
}

// CompileCacheHits is how many compilations this backend answered from its executable cache.
func (backend *Backend) CompileCacheHits() int {
	backend.execCache.mu.Lock()
	defer backend.execCache.mu.Unlock()
	return backend.execCache.hits
}
