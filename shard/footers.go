package shard

import (
	"container/list"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/lrstream/lrstream/fetch"
)

// Footers shares the parsed footers of data files between the plans and
// unit reads of one process — every stream of a `serve` process, every
// epoch of a training stream — and, through a source's side cache
// (fetch.SideCache: the Hub's cache folder), between the processes of a
// node: a footer is fetched from storage once per node.
//
// It holds a parsed footer while a plan uses it, and keeps a bounded
// number of bytes (estimated) of footers no plan uses, least recently
// used first out. Units planned with a Footers (PlanOptions) do not hold
// their file's footer: each keeps its row group's thrift bytes (a few
// KiB), the footer's other bytes are shared by the file's units, and a
// unit's read parses a footer of its row group alone (unitTail) — unless
// the store still holds its file's parsed footer (plan order, or all of a
// dataset's footers within the bound), which it then uses — so a run's
// plan does not pin every file's parsed footer. A footer dropped and needed again (by another
// plan: the next epoch's) is read again: from the side cache for remote
// files, from the file otherwise. It is safe for concurrent use.
type Footers struct {
	keep int64

	mu   sync.Mutex
	m    map[string]*footerEntry
	lru  *list.List // unused entries, least recently used first
	kept int64      // cost of the entries in lru

	reads, sideHits, hits, residents atomic.Int64
}

// DefaultFooterKeep is the default Footers bound on footers no read uses:
// 16 MiB, about 5 files of a 100k-frame row-group-per-episode dataset
// (426 KB of thrift each) — the files a plan-order stream is reading and
// planning. Every byte kept is a live heap byte, which the runtime's
// GOGC multiplies in the process's RSS.
const DefaultFooterKeep = 16 << 20

// footerKind is the side cache kind of footers.
const footerKind = "footers"

type footerEntry struct {
	key  string
	done chan struct{}
	ft   *footer
	err  error
	refs int
	el   *list.Element
	cost int64
}

// NewFooters returns a footer store keeping up to keep bytes of unused
// parsed footers (0: DefaultFooterKeep; negative: none).
func NewFooters(keep int64) *Footers {
	if keep == 0 {
		keep = DefaultFooterKeep
	}
	return &Footers{keep: max(keep, 0), m: map[string]*footerEntry{}, lru: list.New()}
}

// FooterStats counts a Footers' work.
type FooterStats struct {
	// Reads are footers read from files, SideHits footers read from a
	// side cache, Hits footers found parsed in memory.
	Reads, SideHits, Hits int64
	// Resident counts unit reads that found their file's footer parsed in
	// the store (no parse of the unit's own row group footer).
	Resident int64
	// Held is the number of footers in memory, Kept the estimated bytes
	// of those no read uses.
	Held int
	Kept int64
}

// Stats returns the store's counters.
func (s *Footers) Stats() FooterStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return FooterStats{Reads: s.reads.Load(), SideHits: s.sideHits.Load(), Hits: s.hits.Load(), Resident: s.residents.Load(), Held: len(s.m), Kept: s.kept}
}

// footerCost estimates a parsed footer's memory once planned: its thrift
// bytes and parquet-go's parsed metadata and row groups take about 7.4
// times its thrift bytes (heap profile of a 10M-frame stream: 117 MB held
// by 37 footers of 426 KB); eight times, to stay on the safe side.
func footerCost(ft *footer) int64 { return 8*int64(len(ft.tail)) + 4096 }

// acquire returns the footer of f (name in src), reading it (or its side
// cache entry) when no other user has it, and a release function to call
// once done with it.
func (s *Footers) acquire(ctx context.Context, src fetch.Source, name string, f fetch.File) (*footer, func(), error) {
	key := footerKey(src, name, f.Size())
	s.mu.Lock()
	e := s.m[key]
	if e == nil {
		e = &footerEntry{key: key, done: make(chan struct{}), refs: 1}
		s.m[key] = e
		s.mu.Unlock()
		e.ft, e.err = s.load(src, name, f)
		if e.err != nil {
			s.mu.Lock()
			delete(s.m, key)
			s.mu.Unlock()
		} else {
			e.cost = footerCost(e.ft)
		}
		close(e.done)
	} else {
		e.refs++
		if e.el != nil {
			s.lru.Remove(e.el)
			e.el = nil
			s.kept -= e.cost
		}
		s.mu.Unlock()
		s.hits.Add(1)
		select {
		case <-e.done:
		case <-ctx.Done():
			s.release(e)
			return nil, nil, ctx.Err()
		}
	}
	if e.err != nil {
		s.release(e)
		return nil, nil, e.err
	}
	var once sync.Once
	return e.ft, func() { once.Do(func() { s.release(e) }) }, nil
}

// footerKey identifies a file's footer in a store: the source, its
// revision, the file's name and size.
func footerKey(src fetch.Source, name string, size int64) string {
	return src.ID() + "\x00" + src.Revision() + "\x00" + name + "\x00" + strconv.FormatInt(size, 10)
}

// resident returns the parsed footer of name (size bytes) in src when the
// store holds it, without reading it or taking a use of it (nil when it
// does not, or s is nil). A parsed footer is immutable: a unit read may
// use it after the store lets it go.
func (s *Footers) resident(src fetch.Source, name string, size int64) *footer {
	if s == nil {
		return nil
	}
	key := footerKey(src, name, size)
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key]
	if e == nil {
		return nil
	}
	select {
	case <-e.done:
		if e.err == nil {
			s.residents.Add(1)
			return e.ft
		}
	default:
	}
	return nil
}

// release drops one use of e; an unused footer joins the LRU, and the
// least recently used ones beyond the bound are dropped.
func (s *Footers) release(e *footerEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.refs--
	if e.refs > 0 || e.err != nil || s.m[e.key] != e {
		return
	}
	e.el = s.lru.PushBack(e)
	s.kept += e.cost
	for s.kept > s.keep && s.lru.Len() > 0 {
		old := s.lru.Remove(s.lru.Front()).(*footerEntry)
		old.el = nil
		s.kept -= old.cost
		delete(s.m, old.key)
	}
}

// load reads f's footer. A remote file's (one that takes range requests)
// comes from the source's side cache when it is there, and goes into it
// when it is read: the cache key is the file's identity at the pinned
// revision (name and size at a commit), and an entry is checked like a
// footer read from the file (parseFooter) before it is used.
func (s *Footers) load(src fetch.Source, name string, f fetch.File) (*footer, error) {
	size := f.Size()
	sc, side := src.(fetch.SideCache)
	if _, remote := f.(fetch.Prefetcher); !remote {
		side = false
	}
	if side {
		if tail, ok := sc.ReadSide(footerKind, name, size); ok {
			if ft, err := parseFooter(tail, size); err == nil {
				s.sideHits.Add(1)
				return ft, nil
			}
		}
	}
	ft, err := readFooter(f, size)
	if err != nil {
		return nil, err
	}
	s.reads.Add(1)
	if side {
		sc.WriteSide(footerKind, name, size, ft.tail)
	}
	return ft, nil
}

// open opens name and returns its footer with the release function.
func (s *Footers) open(ctx context.Context, src fetch.Source, name string) (*footer, func(), error) {
	f, err := src.Open(ctx, name)
	if err != nil {
		return nil, nil, fileErr(src.ID(), name, err)
	}
	defer f.Close()
	ft, release, err := s.acquire(ctx, src, name, f)
	if err != nil {
		return nil, nil, fileErr(src.ID(), name, err)
	}
	return ft, release, nil
}

// openUnitFile opens u's data file with its footer and returns the index
// of u's row group in it: the footer Plan kept in the unit, or, for units
// planned through a Footers, a footer of its row group alone (unitTail),
// or, for a unit not from Plan, the file's own.
func openUnitFile(ctx context.Context, src fetch.Source, u *Unit) (*pfile, int, error) {
	if u.meta == nil {
		var ft *footer
		if u.pq != nil {
			ft = u.pq.footer
		}
		p, err := openFile(ctx, src, u.File, ft)
		return p, u.RowGroup, err
	}
	if ft := u.pq.store.resident(src, u.File, u.pq.size); ft != nil && u.RowGroup < ft.numRowGroups() {
		// The file's footer is still parsed in the store (plan order,
		// or a dataset whose footers fit its bound): no parse per unit.
		p, err := openFile(ctx, src, u.File, ft)
		return p, u.RowGroup, err
	}
	f, err := src.Open(ctx, u.File)
	if err != nil {
		return nil, 0, fileErr(src.ID(), u.File, err)
	}
	fail := func(err error) (*pfile, int, error) {
		f.Close()
		return nil, 0, fileErr(src.ID(), u.File, err)
	}
	if f.Size() != u.pq.size {
		return fail(fmt.Errorf("file changed: %d bytes, %d when its footer was read", f.Size(), u.pq.size))
	}
	ft, err := parseFooter(unitTail(u.pq.head, u.meta, u.pq.foot), f.Size())
	if err != nil {
		return fail(err)
	}
	return &pfile{footer: ft, f: f, src: src, name: u.File}, 0, nil
}

// unitRowGroup returns row group rg's thrift struct with its ordinal set
// to 0 (its place in a list of one; parquet-go checks it): what a unit
// planned through a Footers keeps of its file's footer, with the footer's
// bytes before and after the row_groups list shared by the file's units
// (pqFile.head, pqFile.foot; see unitTail).
func (ft *footer) unitRowGroup(rg int) []byte {
	sp := ft.shape.rgSpans[rg]
	ord := ft.shape.rgOrdinals[rg]
	if ord[0] < 0 {
		return slices.Clone(ft.raw[sp[0]:sp[1]])
	}
	b := make([]byte, 0, sp[1]-sp[0])
	b = append(b, ft.raw[sp[0]:ord[0]]...)
	b = append(b, 0) // zigzag 0: one byte
	return append(b, ft.raw[ord[1]:sp[1]]...)
}

// unitTail returns the tail (footer, its length, "PAR1") of the footer of
// one row group: head (the file's footer up to its row_groups list), a
// list of the one row group, foot (the rest of the footer). It is parsed
// when the unit is read.
func unitTail(head, rowGroup, foot []byte) []byte {
	b := make([]byte, 0, len(head)+1+len(rowGroup)+len(foot)+8)
	b = append(b, head...)
	b = append(b, 1<<4|tcStruct) // a list of one struct
	b = append(b, rowGroup...)
	b = append(b, foot...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(b)))
	return append(b, "PAR1"...)
}
